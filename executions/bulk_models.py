"""Bulk operations (issue 31 §5): an operator's retry or cancel of a filtered set of one
parent's children, run durably in batches, and its outcome ledger. Imported by
``executions.models`` (the app's models); written only by ``executions/core/bulk.py``.

An operation's ledger holds one row per matched child, filled by one ``INSERT … SELECT`` when
the operation is created (the children never pass through Python). Workers then move the rows
from ``pending`` to ``done`` or ``skipped`` (with the reason) in batches, each batch in the same
transaction as the action on its children: a batch either commits with its ledger rows, or
neither happens, so each child is acted on once whatever process dies.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from workflows.models import Workspace


class BulkAction(models.TextChoices):
    RETRY = "retry"
    CANCEL = "cancel"


class BulkState(models.TextChoices):
    RUNNING = "running"  # batches left (or a worker is between them)
    SUCCEEDED = "succeeded"  # every ledger row is done or skipped


class BulkOutcome(models.TextChoices):
    PENDING = "pending"
    SEALED = "sealed"  # a cancel's child is CANCELLED; its descendants are still to sweep
    DONE = "done"
    SKIPPED = "skipped"


class BulkOperation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+", db_index=False)
    # No FK constraint: retention may purge the tree; the operation's record stays.
    execution = models.ForeignKey("executions.Execution", on_delete=models.DO_NOTHING, related_name="+",
                                  db_constraint=False)
    action = models.CharField(max_length=8, choices=BulkAction.choices)
    filter = models.JSONField()
    state = models.CharField(max_length=12, choices=BulkState.choices, db_default=BulkState.RUNNING)
    matched = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(db_default=0)
    skipped = models.PositiveIntegerField(db_default=0)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    # Which worker runs it, until when (DB time): a killed worker's operation is taken over
    # once its lease has expired (core/bulk.py).
    leased_by = models.CharField(max_length=64, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["execution", "-created_at"], name="bulk_operation_of_execution"),
            models.Index(fields=["lease_expires_at"], name="bulk_operation_running",
                         condition=Q(state="running")),
        ]

    def __str__(self) -> str:
        return f"bulk {self.action} {self.id} of {self.execution_id}"


class BulkItem(models.Model):
    """One matched child of an operation: the ledger row (operation, child, outcome, reason)."""

    operation = models.ForeignKey(BulkOperation, on_delete=models.CASCADE, related_name="+", db_index=False)
    position = models.IntegerField()  # the batch order: the child's rank in (spawner, item index) order
    child = models.UUIDField()  # no FK: a purged child's row stays, skipped as 'purged'
    outcome = models.CharField(max_length=8, choices=BulkOutcome.choices, db_default=BulkOutcome.PENDING)
    reason = models.CharField(max_length=200, blank=True, db_default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["operation", "position"], name="bulk_item_unique_position")]
        indexes = [
            # A worker's next batch; the skipped list of the read.
            models.Index(fields=["operation", "outcome", "position"], name="bulk_item_outcome"),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id}[{self.position}] {self.outcome}"
