"""Operators steering running work (issue 31, S24/S25): pauses of execution trees and of
workspaces, and live edits of a running fan-out. Imported by ``executions.models``.

A ``Pause`` row exists while something is paused; resume deletes it (the audit log and the
execution's events keep the history). Claims anti-join this small table
(executions/core/pauses.py), so an empty table costs a claim one look-up per statement.
``FanOutEdit`` rows are the history of a fan-out's overrides; the override itself is the
fan-out row's columns (never the pinned version, whose hash stays)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from workflows.models import Workspace


class Pause(models.Model):
    # Exactly one of the two: an execution (its whole subtree) or a workspace (all of it).
    # No FK constraint on the execution: a purge of its tree must not wait for this row.
    execution = models.OneToOneField("executions.Execution", null=True, blank=True, on_delete=models.DO_NOTHING,
                                     related_name="+", db_constraint=False)
    # The paused execution's root: a claim looks for pauses of its step's tree by it.
    root = models.ForeignKey("executions.Execution", null=True, blank=True, on_delete=models.DO_NOTHING,
                             related_name="+", db_constraint=False, db_index=False)
    workspace = models.OneToOneField(Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    paused_by = models.CharField(max_length=200, blank=True, default="")
    paused_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(condition=(Q(execution__isnull=False, root__isnull=False, workspace__isnull=True)
                                              | Q(execution__isnull=True, root__isnull=True,
                                                  workspace__isnull=False)),
                                   name="pause_one_scope"),
        ]
        indexes = [models.Index(fields=["root"], name="pause_root", condition=Q(root__isnull=False))]

    def __str__(self) -> str:
        return f"pause of {self.execution_id or f'workspace {self.workspace_id}'}"


class FanOutEdit(models.Model):
    """One operator edit of a running fan-out: each field's value before and after."""

    fanout = models.ForeignKey("executions.FanOut", on_delete=models.CASCADE, related_name="edits",
                               db_index=False)
    actor = models.CharField(max_length=200, blank=True, default="")
    # {"maxConcurrency": [50, 10], "maxFailureRatio": [0.05, 0.1], "maxFailures": [null, 3]}
    changes = models.JSONField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["fanout", "id"], name="fanoutedit_fanout")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"edit of fan-out {self.fanout_id} by {self.actor}"
