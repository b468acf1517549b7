"""Request bodies and representations of operators steering running work (issue 31): pause,
drain and resume (S24); live edits of a running fan-out (S25)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from executions.api.serializers import StrictSerializer


class PauseStateSerializer(serializers.Serializer):
    paused = serializers.BooleanField(help_text="Held by a pause: its own, an ancestor's or its workspace's. No "
                                                "step of it (or of anything under it) is claimed.")
    paused_at = serializers.DateTimeField(allow_null=True)
    paused_by = serializers.CharField(allow_blank=True, help_text="Who paused it.")
    paused_scope = serializers.ChoiceField(source="scope", choices=["execution", "ancestor", "workspace"],
                                           allow_null=True, help_text="What holds it paused (null: nothing).")
    paused_execution = serializers.UUIDField(allow_null=True, help_text="The execution whose pause holds it "
                                                                        "(itself or an ancestor).")
    in_flight = serializers.IntegerField(help_text="Steps of it and its descendants still RUNNING (claimed "
                                                   "before the pause; they finish and commit).")
    drained = serializers.BooleanField(help_text="Paused and nothing in flight any more.")


class PauseResultSerializer(PauseStateSerializer):
    changed = serializers.BooleanField(help_text="False: it was already so (pause and resume are idempotent).")


class WorkspacePauseSerializer(serializers.Serializer):
    workspace = serializers.CharField(help_text="The workspace's slug.")
    paused = serializers.BooleanField()
    paused_at = serializers.DateTimeField(allow_null=True)
    paused_by = serializers.CharField(allow_blank=True)
    in_flight = serializers.IntegerField(help_text="Steps of the workspace still RUNNING.")
    drained = serializers.BooleanField()
    changed = serializers.BooleanField()


class _JsonInteger(serializers.IntegerField):
    """A JSON integer (3, or 3.0), never a string or a boolean: the schema says integer."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class _JsonNumber(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class FailureTolerance(StrictSerializer):
    schema_extra = {"minProperties": 1}
    maxFailureRatio = _JsonNumber(
        required=False, min_value=0.0, max_value=1.0, help_text="Tolerated failures as a share of the children.")
    maxFailures = _JsonInteger(
        required=False, allow_null=True, min_value=0, max_value=2**31 - 1,
        help_text="Tolerated failures as a count (null: none); with a ratio both hold.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("give maxFailureRatio and/or maxFailures")
        return attrs


class EditFanOut(StrictSerializer):
    schema_extra = {"minProperties": 1}
    maxConcurrency = _JsonInteger(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1,
        help_text="Children running at once (null: no limit). Takes effect at the next claim.")
    failureTolerance = FailureTolerance(
        required=False, help_text="The merge's tolerance; the merge re-evaluates at once.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("give maxConcurrency and/or failureTolerance")
        return attrs


class FanOutEditSerializer(serializers.Serializer):
    spawner_vertex = serializers.CharField()
    actor = serializers.CharField(allow_blank=True)
    changes = serializers.DictField(child=serializers.ListField(child=serializers.JSONField(allow_null=True),
                                                                 min_length=2, max_length=2),
                                    help_text="Field → [before, after].")
    created_at = serializers.DateTimeField()


class EditFanOutResult(serializers.Serializer):
    spawner_vertex = serializers.CharField()
    changes = serializers.DictField(child=serializers.ListField(child=serializers.JSONField(allow_null=True)),
                                    help_text="Field → [before, after]; empty when nothing changed.")
    max_concurrency = serializers.IntegerField(allow_null=True)
    max_failure_ratio = serializers.FloatField()
    max_failures = serializers.IntegerField(allow_null=True)
    allowed_failures = serializers.IntegerField()
    decided = serializers.BooleanField(help_text="The merge may decide now (it was woken if it waited).")
    exceeded = serializers.BooleanField()
