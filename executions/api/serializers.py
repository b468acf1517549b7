"""Request bodies and representations. Field names are snake_case and are a contract.

Request serializers are strict: a field of the wrong JSON type or an unknown field is an
error naming it (DRF would otherwise turn ``1`` into ``"1"`` and ignore a misspelt
``inputs``). Value rules that belong to the domain (URL schemes, limits) stay in the
services, which report them per field too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions import selectors
from executions.api import pagination
from executions.models import ExecutionStatus, StepStatus
from workflows import tags as tag_rules
from workflows.dsl.parser import VERSION_HASH, VERTEX_ID, WORKFLOW_KEY

# --- strict request fields -------------------------------------------------------------------

class StrictSerializer(serializers.Serializer):
    # Refuses unknown fields (the schema says ``additionalProperties: false``); ``fixed`` names
    # fields of the resource a body may not carry, with the reason. (A comment, not a
    # docstring: the schema would show it as every request body's description.)
    fixed: Mapping[str, str] = {}
    schema_extra: Mapping[str, Any] = {}  # what the fields' own schemas cannot say (schema.StrictBody)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: [self.fixed.get(name, "unknown field")] for name in unknown})
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    """A string that matches ``pattern`` entirely (Django's regex validator searches, and
    ``$`` lets a trailing newline through)."""

    default_error_messages = {"type": "must be a string"}

    def __init__(self, pattern: re.Pattern[str], **kwargs: Any) -> None:
        self.whole = pattern
        super().__init__(f"^(?:{pattern.pattern})$", **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("type")
        if not self.whole.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


def workflow_key_field(**kwargs: Any) -> StrictRegexField:
    return StrictRegexField(WORKFLOW_KEY, max_length=128,
                            error_messages={"invalid": "a workflow key is 1-128 letters, digits, '.', '_' or '-'"},
                            **kwargs)


def version_hash_field(**kwargs: Any) -> StrictRegexField:
    return StrictRegexField(VERSION_HASH, min_length=64, max_length=64,
                            error_messages={"invalid": "a version hash is 64 lowercase hex digits"}, **kwargs)


def vertex_field(**kwargs: Any) -> StrictRegexField:
    return StrictRegexField(VERTEX_ID, max_length=64,
                            error_messages={"invalid": "a vertex id is a letter or '_' then letters, digits, "
                                                       "'_' or '-' (64 at most)"}, **kwargs)


# Any JSON value the API can store (executions/core/storable.py): no NUL character or lone
# surrogate in a string or key. The component is added by schema.add_components; nesting is
# limited to 100 levels too, which the schema does not state.
JSON_REF = {"$ref": "#/components/schemas/Json"}


@extend_schema_field(JSON_REF)
class StorableJSONField(serializers.JSONField):
    pass


TAGS_SCHEMA = {"type": "object", "maxProperties": tag_rules.MAX_TAGS,
               "propertyNames": {"pattern": f"^{tag_rules.KEY.pattern}$"},
               "additionalProperties": {"type": "string", "maxLength": tag_rules.MAX_VALUE,
                                        "pattern": "^[^\\u0000]*$"}}  # PostgreSQL stores no NUL


@extend_schema_field(TAGS_SCHEMA)
class TagsField(serializers.JSONField):
    """Tags as given; their rules (workflows/tags.py) are the service's, which names each bad
    one (``tags.<key>``) in the problem's ``errors``."""


@extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
class TagsOutField(serializers.JSONField):
    def get_attribute(self, instance: Any) -> Any:
        return super().get_attribute(instance) or {}  # none: {} (DRF would print None as null)


# --- request bodies --------------------------------------------------------------------------

class PriorityField(serializers.IntegerField):
    """A priority, 1 (first) to 5, as a JSON integer (1.0 is one too, as JSON Schema says): not a
    string of digits, not a boolean."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=1, max_value=5, **kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not (isinstance(data, int) or (isinstance(data, float) and data.is_integer())):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StartExecution(StrictSerializer):
    schema_extra = {"anyOf": [{"required": ["workflow"]},
                              {"required": ["version"], "properties": {"version": {"type": "string"}}}]}

    workflow = workflow_key_field(required=False, help_text="Workflow key; its current version runs.")
    version = version_hash_field(required=False, allow_null=True,
                                 help_text="A version hash to pin (of `workflow`, if given).")
    input = StorableJSONField(required=False, default=dict, allow_null=True,
                              help_text="The execution input (any JSON; `{}` if omitted).")
    tags = TagsField(required=False, allow_null=True,
                     help_text="Up to 20 string pairs (keys 1-64 of `a-z 0-9 _ . -`, values at most 256 "
                               "characters), inherited by every descendant; search with `?tag=key:value`.")
    priority = PriorityField(required=False, help_text="1 (first) to 5; default 3. Every descendant shares it; within "
                                                  "the workspace higher priorities are claimed first (with aging).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("workflow") and not attrs.get("version"):
            raise serializers.ValidationError({"workflow": ["give a workflow key or a version hash"]})
        return attrs


class ChangeExecution(StrictSerializer):
    schema_extra = {"required": ["priority"]}  # a PATCH body's component marks nothing required by itself
    priority = PriorityField(help_text="The tree's new priority, 1 (first) to 5: the root's and every "
                                                  "descendant's, running or not.")


class RetryExecution(StrictSerializer):
    input = StorableJSONField(required=False, allow_null=True,
                              help_text="Replace the execution's input before retrying (any JSON). The edit is "
                                        "noted in its events and the audit log.")


class UploadSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text='Name it in a start\'s input: `{"entries": {"$upload": "<id>"}}`.')
    items = serializers.IntegerField(help_text="Items stored (blank lines are skipped).")
    bytes = serializers.IntegerField(help_text="Bytes of the body received.")
    format = serializers.ChoiceField(choices=["jsonl", "csv"])


class RetryFailedChildren(StrictSerializer):
    spawner = vertex_field(required=False, help_text="Only children of this SPAWNER vertex.")


# --- query parameters (read from ``request.query_params.dict()``) -----------------------------

def cursor_field(cursor: pagination.Cursor) -> StrictRegexField:
    return StrictRegexField(re.compile(cursor.pattern), required=False,
                            error_messages={"invalid": "not a position in this list; use the 'next' link of the "
                                                       "previous page"},
                            help_text=f"{cursor.description} Take it from `next`: any string of this pattern "
                                      "is a position (an empty page past the end), but its form may change.")


class PageQuery(serializers.Serializer):
    """A list ordered by name (or key)."""

    cursor = cursor_field(pagination.NAME)
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000,
                                     help_text="Page size (default 100, at most 1000).")


class EventsQuery(PageQuery):
    cursor = cursor_field(pagination.EVENT)


class MergeOutputQuery(PageQuery):
    cursor = cursor_field(pagination.INDEX)


# A search term: a tag key, a colon, a value (workflows/tags.py; no NUL, as a stored value).
TAG_TERM = re.compile(f"{tag_rules.KEY.pattern}:[^\\x00]{{0,{tag_rules.MAX_VALUE}}}")
# item_key__in: up to MAX_KEYS_IN item keys (each at most 256 characters), comma-separated.
KEYS_IN = re.compile(r"[^,]{0,256}(?:,[^,]{0,256}){0,99}")


class ExecutionListQuery(PageQuery):
    cursor = cursor_field(pagination.EXECUTION)
    status = serializers.ChoiceField(choices=ExecutionStatus.choices, required=False)
    workflow = StrictRegexField(WORKFLOW_KEY, max_length=128, required=False, help_text="Workflow key.")
    # DRF's metaclass moves declared fields off the class, so `parent` does not clash with
    # Field.parent at run time; the stubs cannot know that.
    parent = serializers.UUIDField(required=False, help_text="Children of this execution.")  # type: ignore[assignment]
    top_level = serializers.BooleanField(required=False, allow_null=True, default=None,
                                         help_text="true: only executions without a parent; false: only children.")
    waiting = serializers.ChoiceField(choices=["callback", "event", "any"], required=False,
                                      help_text="Only executions with a step WAITING for a callback, an event, or "
                                                "either.")
    tag = serializers.ListField(
        child=StrictRegexField(TAG_TERM, error_messages={"invalid": "key:value, e.g. customer:acme (" +
                                                                    tag_rules.KEY_RULE + ")"}),
        required=False, max_length=tag_rules.MAX_TERMS,
        help_text="`key:value` (split at the first colon); repeat it (`?tag=customer:acme&tag=region:eu`): only "
                  "executions that have every one of these tags (their own or inherited).")


class ChildrenExportQuery(StrictSerializer):
    status = serializers.ChoiceField(choices=ExecutionStatus.choices, required=False,
                                     help_text="Only children with this status (e.g. FAILED).")


class RetryFailedQuery(StrictSerializer):
    spawner = StrictRegexField(VERTEX_ID, max_length=64, required=False,
                               help_text="Only children of this SPAWNER vertex.")


class ChildrenQuery(PageQuery):
    cursor = cursor_field(pagination.CHILD)
    status = serializers.ChoiceField(choices=ExecutionStatus.choices, required=False)
    spawner = StrictRegexField(VERTEX_ID, max_length=64, required=False,
                               help_text="Only children of this SPAWNER vertex.")
    item_key = serializers.CharField(required=False, max_length=256, trim_whitespace=False,
                                     help_text="Only the child (or children) with this item key (the SPAWNER's "
                                               "`itemKey`).")
    item_key__in = StrictRegexField(KEYS_IN, required=False, trim_whitespace=False,
                                    error_messages={"invalid": "at most 100 comma-separated item keys, each at "
                                                               "most 256 characters"},
                                    help_text="Comma-separated item keys (at most 100, each at most 256 "
                                              "characters): the children with any of them.")
    error_contains = serializers.CharField(required=False, max_length=500, trim_whitespace=False,
                                           help_text="Only children whose error contains this text (any case).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "item_key__in" in attrs:
            attrs["item_key__in"] = attrs["item_key__in"].split(",")
        return attrs


# --- representations -------------------------------------------------------------------------

def _counts(**kwargs: Any) -> serializers.DictField:
    return serializers.DictField(
        child=serializers.IntegerField(), **kwargs,
        help_text="Children by status: PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED and NEVER_STARTED "
                  "(items not spawned yet).")


class ExecutionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=ExecutionStatus.choices)
    workflow = serializers.CharField(source="workflow.key", help_text="Workflow key.")
    version = serializers.CharField(source="version.hash", help_text="Hash of the version it runs (pinned).")
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment] # as above
    root = serializers.UUIDField(source="root_id", allow_null=True)  # type: ignore[assignment] # as above
    chained_from = serializers.UUIDField(source="chained_from_id", allow_null=True)
    spawn_vertex = serializers.CharField(allow_null=True, help_text="The parent's SPAWNER vertex (children only).")
    item_index = serializers.IntegerField(allow_null=True, help_text="Index of its item in the fan-out.")
    item_key = serializers.CharField(allow_null=True, help_text="Its item's business key (the SPAWNER's `itemKey`).")
    tags = TagsOutField(help_text="Its tags: those of its start, or inherited from its parent or chainer.")
    depth = serializers.IntegerField()
    priority = serializers.IntegerField(help_text="1 (first) to 5, shared by the whole tree.")
    attempt = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)
    idempotency_key = serializers.CharField(allow_null=True)
    created_by = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True, help_text="Its first start.")
    attempt_started_at = serializers.DateTimeField(source="last_started_at", allow_null=True,
                                                   help_text="When its latest round began (a retry starts one).")
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_seconds = serializers.FloatField(source="duration", allow_null=True,
                                              help_text="The latest round's: attempt_started_at to finished_at.")
    total_duration_seconds = serializers.FloatField(source="total_duration", allow_null=True,
                                                    help_text="From the first start to finished_at, every round.")
    counts = _counts(allow_null=True)


class AncestorSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    workflow = serializers.CharField(source="workflow.key")
    status = serializers.ChoiceField(choices=ExecutionStatus.choices)
    spawn_vertex = serializers.CharField(allow_null=True)
    item_index = serializers.IntegerField(allow_null=True)


class WaitingSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="children, signal, timer, retry backoff, payload pressure, quota or "
                                           "deferred.")
    reason = serializers.CharField()
    next_check_at = serializers.DateTimeField(allow_null=True, help_text="When it is looked at again (null: when a "
                                                                         "signal wakes it, e.g. its children).")


class StepSerializer(serializers.Serializer):
    vertex = serializers.CharField()
    status = serializers.ChoiceField(choices=StepStatus.choices, help_text="The stored status. A step deferred "
                                     "until a due time (timer, backoff, payload pressure) stays READY.")
    display_status = serializers.SerializerMethodField(help_text="What operators see: WAITING for any step that "
                                                       "waits (see waiting), else status.")
    waiting = serializers.SerializerMethodField(help_text="How it waits (null: it does not).")
    prev_vertex = serializers.CharField(allow_null=True)
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    due_at = serializers.DateTimeField(help_text="When a READY step may run (timers, backoff, deferrals).")
    wait_reason = serializers.CharField(allow_blank=True)
    destination = serializers.CharField(source="destination.name", allow_null=True)
    error = serializers.CharField(allow_blank=True)
    lease_expiries = serializers.IntegerField(help_text="Times a worker's lease on it expired.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True, help_text="Its first attempt's start.")
    attempt_started_at = serializers.DateTimeField(allow_null=True, help_text="Its latest attempt's start.")
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.ChoiceField(choices=StepStatus.choices))
    def get_display_status(self, step: Any) -> str:
        return str(selectors.steps.display_status(step))

    @extend_schema_field(WaitingSerializer(allow_null=True))
    def get_waiting(self, step: Any) -> dict[str, Any] | None:
        found = selectors.steps.waiting(step)
        return None if found is None else WaitingSerializer(found).data


class FanOutSerializer(serializers.Serializer):
    spawner_vertex = serializers.CharField()
    merge_vertex = serializers.CharField(allow_null=True)
    total = serializers.IntegerField()
    created = serializers.IntegerField(help_text="Children created so far.")
    spawn_complete = serializers.BooleanField()
    counts = _counts()
    percent_finished = serializers.FloatField(source="percent")
    merge_state = serializers.CharField(source="explanation", help_text="The merge rule and where it stands.")
    decided = serializers.BooleanField(help_text="The merge may decide now: every child ended, or failFast and "
                                                 "failure is certain, or its quorum was reached.")
    exceeded = serializers.BooleanField(help_text="More failures than the merge tolerates (it fails once decided).")
    finished = serializers.BooleanField(help_text="Every item was spawned and every child ended.")
    fail_fast = serializers.BooleanField()
    allowed_failures = serializers.IntegerField()
    max_failure_ratio = serializers.FloatField()
    max_failures = serializers.IntegerField(allow_null=True, help_text="failureTolerance.maxFailures in force "
                                                                       "(null: none).")
    max_concurrency = serializers.IntegerField(allow_null=True, help_text="maxConcurrency in force (null: no "
                                                                          "limit); an edit overrides the version's.")
    tolerated = serializers.ListField(child=serializers.CharField())
    min_successful = serializers.IntegerField(allow_null=True, help_text=(
        "A quorum merge's minSuccessful (minSuccessfulRatio × total rounded up); null without a quorum. It "
        "succeeds once that many children succeeded (`reached`) and fails once that is impossible (`exceeded`)."))
    reached = serializers.BooleanField(help_text="The quorum was reached (always false without one).")


class ExecutionDetailSerializer(ExecutionSerializer):
    lineage = AncestorSerializer(many=True, source="detail.lineage", help_text="Ancestors, root first.")
    input = serializers.JSONField(source="detail.input.value", allow_null=True,
                                  help_text="The input, when at most 64 KB (`input_inlined`); else null: read "
                                            "`input_preview`, or GET …/input for the whole.")
    input_size_bytes = serializers.IntegerField(source="detail.input.size_bytes", allow_null=True,
                                                help_text="Size of the stored input's JSON (null: none stored).")
    input_inlined = serializers.BooleanField(source="detail.input.inlined")
    input_preview = serializers.CharField(source="detail.input.preview", allow_null=True,
                                          help_text="The shape of an input too large to inline (keys, list "
                                                    "lengths, first elements); null when inlined.")
    output = serializers.JSONField(source="detail.output.value", allow_null=True,
                                   help_text="The output, when at most 64 KB (`output_inlined`); else null.")
    output_size_bytes = serializers.IntegerField(source="detail.output.size_bytes", allow_null=True)
    output_inlined = serializers.BooleanField(source="detail.output.inlined")
    output_preview = serializers.CharField(source="detail.output.preview", allow_null=True)
    steps = StepSerializer(many=True, source="detail.steps")
    fanouts = FanOutSerializer(many=True, source="detail.fanouts")
    payloads_purged_at = serializers.DateTimeField(
        source="detail.payloads_purged_at", allow_null=True,
        help_text="When data retention deleted the payloads of its tree (S19): input and output are then null "
                  "and no retry is accepted.")
    paused = serializers.BooleanField(source="detail.pause.paused",
                                      help_text="Held by a pause (its own, an ancestor's or the workspace's): "
                                                "nothing of it is claimed (issue 31).")
    paused_at = serializers.DateTimeField(source="detail.pause.paused_at", allow_null=True)
    paused_scope = serializers.ChoiceField(source="detail.pause.scope", choices=["execution", "ancestor", "workspace"],
                                           allow_null=True, help_text="What holds it paused (null: nothing).")
    in_flight = serializers.IntegerField(source="detail.pause.in_flight",
                                         help_text="Steps of it and its descendants RUNNING now.")
    drained = serializers.BooleanField(source="detail.pause.drained",
                                       help_text="Paused and nothing in flight any more.")
    fanout_edits = serializers.ListField(source="detail.fanout_edits", child=serializers.DictField(),
                                         help_text="Operators' live edits of its fan-outs, oldest first: "
                                                   "spawner_vertex, actor, changes (field → [before, after]), "
                                                   "created_at.")


class MergeItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's index in the spawner's list.")
    status = serializers.CharField(help_text="The child's status.")
    output = serializers.JSONField(allow_null=True, help_text="The child's output; null unless it SUCCEEDED.")


class MergeOutputPage(serializers.Serializer):
    vertex = serializers.CharField()
    spawner = serializers.CharField()
    total = serializers.IntegerField(help_text="Items in the fan-out.")
    counts = _counts()
    results = MergeItemSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")


class EventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    vertex = serializers.CharField(allow_blank=True)
    step = serializers.IntegerField(source="step_id", allow_null=True)
    from_status = serializers.CharField(allow_blank=True)
    to_status = serializers.CharField(allow_blank=True)
    attempt = serializers.IntegerField(allow_null=True)
    message = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class CancelResultSerializer(serializers.Serializer):
    execution = ExecutionSerializer()
    cancelled = serializers.IntegerField(help_text="Executions cancelled: this one and its open descendants.")


class CancelledChildrenSerializer(serializers.Serializer):
    cancelled = serializers.IntegerField(help_text="Unfinished descendants cancelled (0: none was open).")


class RetryResultSerializer(serializers.Serializer):
    execution = ExecutionSerializer()
    step = StepSerializer(help_text="The step that will run again.")


class RetriedSerializer(serializers.Serializer):
    """What a retry of the failed children re-runs (POST) or would re-run now (GET), S28."""

    retried = serializers.IntegerField(help_text="Children put back to run: `failed` + `cancelled_by_fail_fast`.")
    failed = serializers.IntegerField(help_text="FAILED children re-run (not those failed on a FAIL vertex).")
    cancelled_by_fail_fast = serializers.IntegerField(
        help_text="Children the failFast policy cancelled when the merge failed, re-run (an operator's cancels "
                  "stay cancelled).")
    never_started = serializers.IntegerField(
        help_text="Items the spawner never started (failFast stopped it), spawned now, once each.")


class PublishedSerializer(serializers.Serializer):
    key = serializers.CharField()
    hash = serializers.CharField()
    created = serializers.BooleanField(help_text="False when this exact logic was already a version.")


class VersionSummarySerializer(serializers.Serializer):
    hash = serializers.CharField()
    author = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class WorkflowSerializer(serializers.Serializer):
    key = serializers.CharField()
    current_version = serializers.CharField(source="current_version.hash", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WorkflowDetailSerializer(WorkflowSerializer):
    versions = VersionSummarySerializer(many=True, source="recent_versions", help_text="Newest first (100 at most).")
    version_count = serializers.IntegerField()


class VersionSerializer(serializers.Serializer):
    hash = serializers.CharField()
    workflows = serializers.ListField(child=serializers.CharField(), help_text="Keys published with this logic.")
    author = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    dsl = serializers.JSONField(help_text="The normalised DSL (what the hash is computed from).")


# --- problems (for the schema; errors.py renders them) ---------------------------------------

class ProblemDetailSerializer(serializers.Serializer):
    field = serializers.CharField(required=False, help_text="Body field, query parameter or header.")
    path = serializers.CharField(required=False, help_text="JSON path into the submitted document.")
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    code = serializers.CharField(help_text="Machine-readable: invalid, invalid-workflow, not-found, conflict, …")
    detail = serializers.CharField()
    errors = ProblemDetailSerializer(many=True)  # type: ignore[assignment] # a declared field, as above
