"""Request bodies and representations of waits for the outside world (S27): callbacks,
their heartbeats, operator completions of waiting steps, and events."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from executions.api.serializers import StrictRegexField, StrictSerializer
from workflows.dsl.waits import EVENT_NAME

EVENT_ID = re.compile(r"[^\x00]{1,200}", re.DOTALL)  # any string of 1-200 characters but NUL


class Completion(StrictSerializer):
    # One of two shapes; the schema says which fields go with which status.
    schema_extra = {"oneOf": [
        {"properties": {"status": {"const": "SUCCEEDED"}}, "not": {"required": ["error"]}},
        {"properties": {"status": {"const": "FAILED"}}, "required": ["error"], "not": {"required": ["output"]}},
    ]}
    status = serializers.ChoiceField(choices=["SUCCEEDED", "FAILED"],
                                     help_text="SUCCEEDED (with `output`) or FAILED (with `error`).")
    output = serializers.JSONField(required=False, allow_null=True,
                                   help_text="With SUCCEEDED: the step's output (any JSON).")
    error = serializers.CharField(required=False, allow_blank=False, max_length=4000, trim_whitespace=False,
                                  help_text="With FAILED: why; the step's retry policy applies.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["status"] == "SUCCEEDED" and "error" in attrs:
            raise serializers.ValidationError({"error": ["only with status FAILED"]})
        if attrs["status"] == "FAILED":
            if "output" in attrs:
                raise serializers.ValidationError({"output": ["only with status SUCCEEDED"]})
            if "error" not in attrs:
                raise serializers.ValidationError({"error": ["required with status FAILED"]})
        return attrs


class CompletionResult(serializers.Serializer):
    status = serializers.CharField()
    output = serializers.JSONField(required=False, allow_null=True)
    error = serializers.CharField(required=False)
    changed = serializers.BooleanField(help_text="False when this completion had been accepted before (a "
                                                 "repeat changes nothing).")


class HeartbeatResult(serializers.Serializer):
    times_out_at = serializers.DateTimeField(help_text="When the wait times out at the latest.")
    heartbeat_due_at = serializers.DateTimeField(allow_null=True, help_text="The next heartbeat is due by then "
                                                                            "(null: the wait has none).")


class PostEvent(StrictSerializer):
    name = StrictRegexField(EVENT_NAME, max_length=128,
                            error_messages={"invalid": "an event name is 1-128 letters, digits, '.', '_', ':', "
                                                       "'/' or '-'"})
    # DRF's metaclass moves declared fields off the class, so `data` does not clash with
    # Serializer.data at run time; the stubs cannot know that.
    data = serializers.JSONField(required=False, allow_null=True, default=None,  # type: ignore[assignment]
                                 help_text="The event's data: the output of every step it resumes.")
    id = StrictRegexField(EVENT_ID, required=False, max_length=200,
                          help_text="Makes delivery idempotent: the same id again delivers nothing and "
                                    "answers the first delivery's count.")


class Delivered(serializers.Serializer):
    delivered = serializers.IntegerField(help_text="How many waiting steps the event resumed.")


class StepCallback(serializers.Serializer):
    url = serializers.CharField(help_text="POST the completion here (no API token needed).")
    heartbeat_url = serializers.CharField()
    token = serializers.CharField()
    waiting_since = serializers.DateTimeField()
    times_out_at = serializers.DateTimeField()
