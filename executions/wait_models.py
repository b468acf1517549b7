"""Waiting for the outside world (S27): a step's wait (for a callback or an event) and the
events delivered to a workspace. Imported by ``executions.models`` (the app's models).

A ``Wait`` row exists per step attempt that waits. A callback token is never stored: only
its SHA-256 (unique) and the nonce it was derived from (executions/core/waits.py). Whether a
token is still good is not a column: it follows from its step (same attempt, still waiting
or still running the call that handed the token out), so a timeout, a cancel or a retry
revokes it without touching this table.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from workflows.models import Workspace


class WaitKind(models.TextChoices):
    CALLBACK = "callback"
    EVENT = "event"


class Wait(models.Model):
    # No FK constraints: rows are written only by core/waits.py, which selects the steps it
    # describes; and a purged tree's steps must not wait for these rows.
    step = models.ForeignKey("executions.Step", on_delete=models.DO_NOTHING, related_name="+", db_index=False,
                             db_constraint=False)
    attempt = models.PositiveIntegerField()
    execution = models.ForeignKey("executions.Execution", on_delete=models.DO_NOTHING, related_name="+",
                                  db_index=False, db_constraint=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.DO_NOTHING, related_name="+", db_index=False,
                                  db_constraint=False)
    kind = models.CharField(max_length=8, choices=WaitKind.choices)
    token_hash = models.BinaryField(null=True, blank=True)  # sha256 of the callback token
    nonce = models.CharField(max_length=64, blank=True, default="")
    event_name = models.CharField(max_length=128, blank=True, default="")
    # [{"path": [keys into the event data], "value": the execution's value}, …]
    match = models.JSONField(default=list, blank=True)
    match_text = models.TextField(blank=True, default="")  # "id = 42" for operators
    timeout_seconds = models.FloatField()
    heartbeat_seconds = models.FloatField(null=True, blank=True)
    lookback_seconds = models.FloatField(default=0)
    deadline = models.DateTimeField()
    created_at = models.DateTimeField(db_default=Now())
    completion = models.JSONField(null=True, blank=True)  # {"status", "output"|"error"}
    completed_at = models.DateTimeField(null=True, blank=True)
    completed_by = models.CharField(max_length=200, blank=True, db_default="")  # "callback", "event …", "operator …"

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["step", "attempt"], name="wait_step_attempt"),
            models.UniqueConstraint(fields=["token_hash"], name="wait_token_hash"),
        ]
        indexes = [
            # Event delivery: the open event waits of a workspace for one event name.
            models.Index(fields=["workspace", "event_name"], name="wait_open_events",
                         condition=Q(kind="event", completion__isnull=True)),
            models.Index(fields=["created_at"], name="wait_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} wait of step {self.step_id} attempt {self.attempt}"


class ExternalEvent(models.Model):
    """An event posted to a workspace (POST /api/v1/events), kept for lookback and for
    idempotent redelivery for ``SB_EVENT_RETENTION_SECONDS``."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+", db_index=False)
    name = models.CharField(max_length=128)
    data = models.JSONField(null=True, blank=True)
    key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL: no id given
    delivered = models.IntegerField(null=True, blank=True)  # NULL until delivered
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "key"], name="external_event_key",
                                    condition=Q(key__isnull=False)),
        ]
        indexes = [
            models.Index(fields=["workspace", "name", "created_at"], name="external_event_lookback"),
            models.Index(fields=["created_at"], name="external_event_created"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.workspace_id})"
