"""Request bodies and representations of bulk operations (issue 31 §5): the filter of
``…/children/retry`` and ``…/children/cancel``, and ``GET /operations/{id}``."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from executions.api.serializers import StrictRegexField, StrictSerializer, vertex_field
from executions.models import BulkAction, BulkState, ExecutionStatus

TEXT = re.compile(r"[^\x00]{1,2000}", re.DOTALL)  # any 1-2000 characters but NUL
ITEM_KEY = re.compile(r"[^\x00]{1,256}", re.DOTALL)  # a business key (Execution.item_key)
SELECTING = ("status", "error_contains", "indexes", "error_signature", "item_keys")
AT_LEAST_ONE = f"give at least one filter term: {', '.join(SELECTING)}"


def _text(help_text: str) -> StrictRegexField:
    return StrictRegexField(TEXT, required=False, max_length=2000, help_text=help_text,
                            error_messages={"invalid": "1-2000 characters, no NUL"})


class BulkFilter(StrictSerializer):
    schema_extra = {"anyOf": [{"required": [name]} for name in SELECTING]}

    status = serializers.ListField(child=serializers.ChoiceField(choices=ExecutionStatus.choices), min_length=1,
                                   max_length=5, required=False,
                                   help_text="Children in any of these statuses (when the operation starts).")
    error_contains = _text("Children whose error contains this text (case-insensitive).")
    indexes = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=2**31 - 1), min_length=1,
                                    max_length=100_000, required=False,
                                    help_text="Children at these item indexes.")
    item_keys = serializers.ListField(child=StrictRegexField(ITEM_KEY, max_length=256,
                                                             error_messages={"invalid": "1-256 characters, no NUL"}),
                                      min_length=1, max_length=100_000, required=False,
                                      help_text="Children with these business keys (the SPAWNER's `itemKey`).")
    error_signature = _text("FAILED children whose error signature (an error group of "
                            "`GET …/children/error-groups`) is exactly this.")
    spawner = vertex_field(required=False, help_text="Only children of this SPAWNER vertex (narrows the "
                                                     "terms above; not a term on its own).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not any(name in attrs for name in SELECTING):
            raise serializers.ValidationError({name: [AT_LEAST_ONE] for name in SELECTING})
        return attrs


class OperationStarted(serializers.Serializer):
    operation = serializers.UUIDField(help_text="Read its progress at `GET /api/v1/operations/{id}`.")
    matched = serializers.IntegerField(help_text="Children the filter matched (the ledger's rows).")


class SkippedChild(serializers.Serializer):
    child = serializers.UUIDField()
    item_index = serializers.IntegerField(allow_null=True, help_text="Null: the child was purged.")
    reason = serializers.CharField(help_text="Why it was not acted on: `purged`, `not failed any more (…)`, "
                                             "`failed on a FAIL vertex`, `cancelled by an operator`, "
                                             "`already SUCCEEDED`, …")


class OperationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    execution = serializers.UUIDField(help_text="The parent whose children it acts on.")
    action = serializers.ChoiceField(choices=BulkAction.choices)
    filter = serializers.DictField(help_text="The filter it was created with.")
    state = serializers.ChoiceField(choices=BulkState.choices,
                                    help_text="`running` until every matched child is done or skipped.")
    matched = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Children acted on (retried / cancelled), each once.")
    skipped = serializers.IntegerField(help_text="Children not acted on, each with its reason.")
    pending = serializers.IntegerField(help_text="`matched - done - skipped`.")
    skipped_reasons = serializers.DictField(child=serializers.IntegerField(),
                                            help_text="How many children were skipped for each reason.")
    skipped_children = SkippedChild(many=True, help_text="The first 100 skipped children, in item order.")
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class ErrorGroup(serializers.Serializer):
    signature = serializers.CharField(help_text="The error with numbers, ids and quoted values taken out (HTTP "
                                                "status codes kept); a `error_signature` filter term.")
    count = serializers.IntegerField()
    example = serializers.UUIDField(help_text="One FAILED child of the group.")
    example_index = serializers.IntegerField()
    example_error = serializers.CharField(help_text="That child's error (its first 500 characters).")
