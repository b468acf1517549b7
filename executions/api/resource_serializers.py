"""Request bodies and representations of the workspace's configured resources: destinations
and schedules (their fields are a contract, as in serializers.py).

Their value rules belong to the services (executions/destinations/rules.py,
executions/services/schedules.py), which report every bad field at once with one message:
the request fields here only check the JSON type, so the API and the UI show the same words.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions.api.serializers import StrictSerializer
from executions.destinations import credentials as credential_rules
from executions.destinations import rules as destinations
from executions.services import schedules

# --- request bodies --------------------------------------------------------------------------

class _Unchecked(serializers.Field):
    """A JSON value handed on as received: executions/destinations/rules.py checks it (type and
    bounds), so the API and the UI refuse the same input with the same message."""

    def __init__(self, rule: str, extra: str = "") -> None:
        text = destinations.RULES[rule]
        super().__init__(required=False, allow_null=True, help_text=f"{text[0].upper()}{text[1:]}.{extra}")

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(OpenApiTypes.STR)
class _UncheckedText(_Unchecked):
    pass


@extend_schema_field(OpenApiTypes.NUMBER)
class _UncheckedNumber(_Unchecked):
    pass


@extend_schema_field(OpenApiTypes.INT)
class _UncheckedInteger(_Unchecked):
    pass


@extend_schema_field(OpenApiTypes.OBJECT)
class _UncheckedObject(_Unchecked):
    pass


class CredentialsSummary(serializers.Serializer):
    set = serializers.BooleanField(help_text="True when calls can use them; false when they are stored but "
                                             "SB_CREDENTIALS_KEY can no longer open them (see error).")
    kind = serializers.ChoiceField(choices=["bearer", "basic", "headers"])
    error = serializers.CharField(required=False, help_text="Why stored credentials cannot be used: set them again.")


class DestinationFields(StrictSerializer):
    name = _UncheckedText("name", " Required on create; on update only the current name.")
    base_url = _UncheckedText("base_url", " Required on create. HTTP vertex paths are appended to it.")
    timeout_seconds = _UncheckedNumber("timeout_seconds", " Default 10.")
    concurrency_limit = _UncheckedInteger("concurrency_limit", " Calls in flight at once across all workers.")
    rate_per_second = _UncheckedNumber("rate_per_second")
    max_response_bytes = _UncheckedInteger("max_response_bytes", " A bigger response fails the call.")
    credentials = _UncheckedObject("credentials", " Stored encrypted; never returned.")


class CreateDestination(DestinationFields):
    pass


class UpdateDestination(DestinationFields):
    """Every field optional. ``name`` is accepted only unchanged: workflows refer to a
    destination by name, so renaming one would silently break them."""


class _ScheduleField(serializers.Field):
    """A JSON value handed on as received: executions/services/schedules.py checks it, so the API and
    the admin refuse the same input with the same message."""

    def __init__(self, rule: str, extra: str = "", **kwargs: Any) -> None:
        text = schedules.RULES[rule]
        super().__init__(required=False, help_text=f"{text[0].upper()}{text[1:]}.{extra}", **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(OpenApiTypes.STR)
class _ScheduleText(_ScheduleField):
    pass


@extend_schema_field(OpenApiTypes.BOOL)
class _ScheduleFlag(_ScheduleField):
    pass


@extend_schema_field(OpenApiTypes.ANY)
class _ScheduleInput(_ScheduleField):
    pass


@extend_schema_field(OpenApiTypes.INT)
class _SchedulePriority(_ScheduleField):
    pass


class ScheduleFields(StrictSerializer):
    name = _ScheduleText("name", " Required on create; on update only the current name.")
    workflow = _ScheduleText("workflow", " Required on create; cannot be changed.")
    cron = _ScheduleText("cron", " Required on create.")
    timezone = _ScheduleText("timezone", " Default UTC.")
    input = _ScheduleInput("input", " Default {}.", allow_null=True)
    catch_up = _ScheduleFlag("catch_up", " Default false.")
    enabled = _ScheduleFlag("enabled", " Default true.")
    priority = _SchedulePriority("priority", " Default 3.")


class CreateSchedule(ScheduleFields):
    pass


class UpdateSchedule(ScheduleFields):
    """Every field optional; ``name`` and ``workflow`` only unchanged."""


# --- representations -------------------------------------------------------------------------

class DestinationSerializer(serializers.Serializer):
    name = serializers.CharField()
    base_url = serializers.CharField()
    timeout_seconds = serializers.FloatField()
    concurrency_limit = serializers.IntegerField(allow_null=True)
    rate_per_second = serializers.FloatField(allow_null=True)
    max_response_bytes = serializers.IntegerField()
    credentials = serializers.SerializerMethodField(help_text="Whether credentials are set, and their kind; "
                                                              "never the secret.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(CredentialsSummary(allow_null=True))
    def get_credentials(self, destination: Any) -> dict[str, Any] | None:
        if not destination.credentials_kind:
            return None
        problem = credential_rules.problem(destination.credentials_sealed)
        if problem:  # stored, but no call can use them: not "set"
            return {"set": False, "kind": destination.credentials_kind, "error": problem}
        return {"set": True, "kind": destination.credentials_kind}


class ScheduleSerializer(serializers.Serializer):
    name = serializers.CharField()
    workflow = serializers.CharField(source="workflow.key", help_text="The workflow key; its current version runs.")
    cron = serializers.CharField()
    timezone = serializers.CharField()
    input = serializers.JSONField()
    catch_up = serializers.BooleanField()
    enabled = serializers.BooleanField()
    priority = serializers.IntegerField(help_text="The priority of the executions it starts, 1 (first) to 5.")
    next_run = serializers.DateTimeField(source="next_run_at", allow_null=True,
                                         help_text="The next fire time (UTC); null while paused.")
    last_run = serializers.DateTimeField(source="last_run_at", allow_null=True,
                                         help_text="The last fire time that started an execution.")
    last_execution = serializers.UUIDField(source="last_execution_id", allow_null=True,
                                           help_text="The execution started at `last_run`.")
    last_error = serializers.CharField(allow_blank=True, help_text="Why the last refused fire time did not start.")
    created_by = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
