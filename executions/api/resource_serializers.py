"""Request bodies and representations of the workspace's configured resources: destinations
and schedules (their fields are a contract, as in serializers.py).

Their value rules belong to the services (executions/destinations/rules.py,
executions/services/schedules.py), which report every bad field at once with one message:
the request fields here only check the JSON type, so the API and the UI show the same words.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.drainage import set_override
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions.api.serializers import JSON_REF, StrictSerializer
from executions.destinations import credentials as credential_rules
from executions.destinations import rules as destinations
from executions.services import schedules

# --- request bodies --------------------------------------------------------------------------

class _Passed(serializers.Field):
    """A JSON value handed on as received (``null`` included): a service checks it (type and
    bounds), so the API and the UI refuse the same input with the same message. ``schema`` is
    that service's rule as JSON Schema, stated in the API's schema."""

    def __init__(self, schema: dict[str, Any], help_text: str, *, required: bool = False) -> None:
        super().__init__(required=required, help_text=help_text, error_messages={"required": "required"})
        set_override(self, "field", schema)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None:  # the service decides whether null means something (none, unlimited)
            return True, None
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


def _destination(rule: str, extra: str = "", *, required: bool = False) -> _Passed:
    text = destinations.RULES[rule]
    return _Passed(destinations.SCHEMAS[rule], f"{text[0].upper()}{text[1:]}.{extra}", required=required)


class CredentialsSummary(serializers.Serializer):
    set = serializers.BooleanField(help_text="True when calls can use them; false when they are stored but "
                                             "SB_CREDENTIALS_KEY can no longer open them (see error).")
    kind = serializers.ChoiceField(choices=["bearer", "basic", "headers"])
    error = serializers.CharField(required=False, help_text="Why stored credentials cannot be used: set them again.")


class CreateDestination(StrictSerializer):
    # Adaptive mode needs its ceiling (concurrency_min <= concurrency_limit too, which JSON
    # Schema cannot compare: docs/api.md, "The schema").
    schema_extra = {"if": {"properties": {"concurrency_mode": {"const": "adaptive"}}, "required": ["concurrency_mode"]},
                    "then": {"required": ["concurrency_limit"],
                             "properties": {"concurrency_limit": {"type": "integer", "minimum": 1}}}}

    name = _destination("name", " Cannot be changed: workflows refer to a destination by name.", required=True)
    base_url = _destination("base_url", " HTTP vertex paths are appended to it.", required=True)
    timeout_seconds = _destination("timeout_seconds", " Default 10.")
    concurrency_limit = _destination("concurrency_limit", " Calls in flight at once across all workers; null: "
                                                          "unlimited (the default).")
    rate_per_second = _destination("rate_per_second", " Null: no rate limit (the default).")
    max_response_bytes = _destination("max_response_bytes", " A bigger response fails the call.")
    credentials = _destination("credentials", " Stored encrypted; never returned.")
    concurrency_mode = _destination("concurrency_mode", " Default fixed.")
    concurrency_min = _destination("concurrency_min", " The floor of adaptive mode.")
    max_cooldown_seconds = _destination("max_cooldown_seconds", " The longest cooldown a throttled answer starts.")
    max_throttled_waits = _destination("max_throttled_waits", " Throttled answers per round of attempts that "
                                                              "cost no attempt.")
    breaker = _destination("breaker", " The circuit breaker; null: none (the default).")
    paused = _destination("paused", " Default false.")


class UpdateDestination(StrictSerializer):
    """Every field optional; the name cannot be changed (it is the URL's)."""

    fixed = {"name": "cannot be changed: workflows refer to a destination by name (leave it out)"}

    base_url = _destination("base_url", " HTTP vertex paths are appended to it.")
    timeout_seconds = _destination("timeout_seconds")
    concurrency_limit = _destination("concurrency_limit", " Null: unlimited.")
    rate_per_second = _destination("rate_per_second", " Null: no rate limit.")
    max_response_bytes = _destination("max_response_bytes", " A bigger response fails the call.")
    credentials = _destination("credentials", " Stored encrypted; never returned. Null removes them.")
    concurrency_mode = _destination("concurrency_mode", " Adaptive needs a concurrency_limit (set or sent).")
    concurrency_min = _destination("concurrency_min", " The floor of adaptive mode.")
    max_cooldown_seconds = _destination("max_cooldown_seconds", " The longest cooldown a throttled answer starts.")
    max_throttled_waits = _destination("max_throttled_waits", " Throttled answers per round of attempts that "
                                                              "cost no attempt.")
    breaker = _destination("breaker", " The circuit breaker; null: none.")
    paused = _destination("paused", " A resume (false) goes on with the kept limit.")


def _schedule(rule: str, extra: str = "", *, required: bool = False) -> _Passed:
    text = schedules.RULES[rule]
    schema = JSON_REF if rule == "input" else \
        {"type": "string", "pattern": schedules.time_zone_pattern()} if rule == "timezone" else schedules.SCHEMAS[rule]
    return _Passed(schema, f"{text[0].upper()}{text[1:]}.{extra}", required=required)


class CreateSchedule(StrictSerializer):
    name = _schedule("name", " Cannot be changed.", required=True)
    workflow = _schedule("workflow", " Cannot be changed; an unknown key is a 404.", required=True)
    cron = _schedule("cron", required=True)
    timezone = _schedule("timezone", " Default UTC.")
    input = _schedule("input", " Default {}.")
    catch_up = _schedule("catch_up", " Default false.")
    enabled = _schedule("enabled", " Default true.")
    priority = _schedule("priority", " Default 3.")


class UpdateSchedule(StrictSerializer):
    """Every field optional; the name and the workflow cannot be changed."""

    fixed = {"name": "cannot be changed (leave it out; create another schedule)",
             "workflow": "cannot be changed (leave it out; create another schedule)"}

    cron = _schedule("cron")
    timezone = _schedule("timezone")
    input = _schedule("input")
    catch_up = _schedule("catch_up")
    enabled = _schedule("enabled")
    priority = _schedule("priority")


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
    concurrency_mode = serializers.ChoiceField(choices=["fixed", "adaptive"])
    concurrency_min = serializers.IntegerField()
    concurrency_current = serializers.SerializerMethodField(
        help_text="Read-only. The limit calls keep to now: adaptive mode's current limit, or the ramp after a "
                  "cooldown in fixed mode; null: concurrency_limit.")
    concurrency_changed_at = serializers.DateTimeField(allow_null=True, help_text="Read-only. The current "
                                                                                  "limit's last change.")
    concurrency_reason = serializers.CharField(help_text="Read-only. Why it last changed.")
    max_cooldown_seconds = serializers.FloatField()
    max_throttled_waits = serializers.IntegerField()
    cooling_until = serializers.SerializerMethodField(help_text="Read-only. While in the future, the destination "
                                                                "is cooling down: no call starts before it.")
    breaker = serializers.JSONField(allow_null=True)
    paused = serializers.BooleanField(help_text="While true no step calling it is claimed; running calls finish "
                                                "and concurrency_limit is kept (issue 31).")
    breaker_state = serializers.SerializerMethodField(help_text="Read-only: closed, open or half_open.")
    breaker_open_until = serializers.SerializerMethodField(help_text="Read-only. While open: when the probe "
                                                                     "call may go.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_concurrency_current(self, destination: Any) -> int | None:
        if destination.concurrency_mode == "adaptive":
            return destination.concurrency_current or destination.concurrency_min
        return destination.concurrency_current

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_cooling_until(self, destination: Any) -> str | None:
        return _when(destination.cooling_until)

    @extend_schema_field(serializers.ChoiceField(choices=["closed", "open", "half_open"]))
    def get_breaker_state(self, destination: Any) -> str:
        return str(destination.breaker_state)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_breaker_open_until(self, destination: Any) -> str | None:
        return _when(destination.breaker_open_until) if destination.breaker_state != "closed" else None

    @extend_schema_field(CredentialsSummary(allow_null=True))
    def get_credentials(self, destination: Any) -> dict[str, Any] | None:
        if not destination.credentials_kind:
            return None
        problem = credential_rules.problem(destination.credentials_sealed)
        if problem:  # stored, but no call can use them: not "set"
            return {"set": False, "kind": destination.credentials_kind, "error": problem}
        return {"set": True, "kind": destination.credentials_kind}


def _when(value: Any) -> str | None:
    return None if value is None else serializers.DateTimeField().to_representation(value)


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
