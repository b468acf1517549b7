"""Executions, steps, events, payloads, fan-outs, destinations and quotas.

Status columns are written only by ``executions/core/state.py`` (tests/unit/test_status_writes.py
enforces it). Times that matter for correctness (due times, leases) are database time.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Func, OrderBy, Q
from django.db.models.functions import Coalesce, Now

from workflows.models import WorkflowDefinition, WorkflowVersion, Workspace


class ExecutionStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class StepStatus(models.TextChoices):
    READY = "READY"  # claimable once due_at has passed (timers, backoff, deferrals wait here)
    RUNNING = "RUNNING"  # leased to a worker
    WAITING = "WAITING"  # waiting for a signal, not a time (a MERGE waiting for children)
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


class CancelCause(models.TextChoices):
    """Why a CANCELLED execution was cancelled (S28): an operator's cancel stays cancelled;
    a child the failFast policy cancelled is re-run when its parent's failed children are."""

    OPERATOR = "operator"  # a cancel of it or of an ancestor (API, UI, command), or any other cancel
    FAIL_FAST = "failFast"  # swept by a failFast merge that failed (fanout.py), at any depth under it
    QUORUM = "quorum"  # swept by a quorum merge that succeeded ("the merge reached minSuccessful")


class Execution(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Foreign keys carry no index of their own where a composite index below leads with
    # them: every index costs each status change an index insert (status is indexed, so
    # updates are never HOT), and the fan-out targets depend on few of them.
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+", db_index=False)
    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.PROTECT, related_name="executions",
                                 db_index=False)
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="executions",
                                db_index=False)
    # Rows are inserted without a status (the database default); state.py moves it.
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices, db_default=ExecutionStatus.PENDING)
    attempt = models.PositiveIntegerField(default=1)
    error = models.TextField(blank=True, default="")
    # The error with its numbers, ids and quoted values taken out (HTTP status codes kept):
    # failed children are grouped by it (issue 33 §3). Computed by PostgreSQL when the row is
    # written (sb_error_signature, migration 0026_bulk), so grouping 100,000 failed children
    # reads an index instead of running regular expressions over every error at each view.
    error_signature = models.GeneratedField(expression=Func(F("error"), function="sb_error_signature"),
                                            output_field=models.TextField(), db_persist=True)
    # Set with CANCELLED (state.cancel_executions), cleared when a re-run moves it out; "" otherwise.
    cancel_cause = models.CharField(max_length=16, choices=CancelCause.choices, blank=True, db_default="")
    # The vertex whose step output is this execution's output (set when it succeeds).
    output_vertex = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: not ended yet

    # Idempotent starts: a repeated key returns the existing execution.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 - NULL: no key (unique)
    request_hash = models.CharField(max_length=64, blank=True, default="")

    # Lineage (S1). A top-level execution is its own root.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children",
                               db_index=False)
    root = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                             db_index=False)
    # No constraint: with no index on this column (one per child would cost every fan-out),
    # each step the purge deletes would make PostgreSQL scan the execution table to check it.
    # The spawner writes it with its own step id (records.py); the parent FK ties the child.
    spawned_by = models.ForeignKey("Step", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                   db_index=False, db_constraint=False)
    spawn_vertex = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: not a child
    item_index = models.IntegerField(null=True, blank=True)
    depth = models.PositiveSmallIntegerField(default=0)
    # 1 (first) to 5; the whole tree shares its root's (records.py inherits it, priorities.py
    # changes it); the claim serves a workspace's higher priorities first (fairness.py).
    priority = models.PositiveSmallIntegerField(db_default=3)
    chained_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="chained_to", db_index=False)
    # Business keys and tags (issue 31 §4). A child's item key: its item's value at the
    # SPAWNER's itemKey (NULL: no itemKey). Tags: a start's string pairs, copied to every
    # descendant (spawned or chained) as it is created (records.py); NULL: none.
    item_key = models.CharField(max_length=256, null=True, blank=True)  # noqa: DJ001 - NULL: no key (indexed)
    tags = models.JSONField(null=True, blank=True)

    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    # When its latest round began (an operator retry or a redrive starts a new one; NULL until
    # it runs, and on rows from before migration 0022, where started_at stands in for it).
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Data lifecycle (S19, executions/core/retention.py), on roots only: when retention began to
    # delete this tree's payloads (from then on no retry in the tree is accepted), and while
    # it is under way, where it got to in the tree's (depth, id) order.
    payloads_purged_at = models.DateTimeField(null=True, blank=True)
    retention_depth = models.SmallIntegerField(null=True, blank=True)
    retention_after = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [
            # S2: the per-item key. Child creation is INSERT … ON CONFLICT DO NOTHING on it.
            models.UniqueConstraint(fields=["parent", "spawn_vertex", "item_index"], name="execution_unique_child_key",
                                    condition=Q(item_index__isnull=False)),
            models.UniqueConstraint(fields=["workspace", "idempotency_key"], name="execution_unique_idempotency_key",
                                    condition=Q(idempotency_key__isnull=False)),
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=5), name="execution_priority_range"),
        ]
        indexes = [
            models.Index(fields=["workspace", "-created_at"], name="execution_ws_created"),
            models.Index(fields=["workspace", "-created_at"], name="execution_ws_top_level",
                         condition=Q(parent__isnull=True)),
            models.Index(fields=["workspace", "status", "-created_at"], name="execution_ws_status"),
            models.Index(fields=["workflow", "-created_at"], name="execution_workflow"),
            models.Index(fields=["parent", "status"], name="execution_parent_status"),
            # Error groups of a parent's failed children, and the bulk filter on a group.
            models.Index(fields=["parent", "error_signature"], name="execution_failed_signature",
                         condition=Q(status="FAILED")),
            # A fan-out's children slowest first (the operator UI's duration sort, issue 14 §7):
            # a page is an index range at 1,000,000 children, not a sort of all of them.
            # Durations are of the latest round (an operator's retry restarts the clock).
            models.Index(F("parent"), F("spawn_vertex"),
                         OrderBy(F("finished_at") - Coalesce(F("attempt_started_at"), F("started_at")),
                                 descending=True, nulls_last=True),
                         F("item_index"), name="execution_child_round_duration",
                         condition=Q(item_index__isnull=False)),
            # A fan-out's finished children by finish time, with their status: the throughput
            # chart buckets them (selectors/throughput.py) with an index-only scan (issue 33).
            models.Index(fields=["parent", "spawn_vertex", "finished_at"], include=["status"],
                         name="execution_child_finished",
                         condition=Q(item_index__isnull=False, finished_at__isnull=False)),
            # A tree in depth order: retention walks it by keyset and purges it bottom-up.
            models.Index(fields=["root", "depth", "id"], name="execution_root_tree"),
            # Retention's candidates (S19): finished roots, oldest first — the SUCCEEDED ones
            # whose payloads are still there, and every finished one for the purge.
            models.Index(fields=["finished_at", "id"], name="execution_payload_retention",
                         condition=Q(parent__isnull=True, status="SUCCEEDED", payloads_purged_at__isnull=True)),
            models.Index(fields=["finished_at", "id"], name="execution_finished_roots",
                         condition=Q(parent__isnull=True, status__in=["SUCCEEDED", "FAILED", "CANCELLED"])),
            models.Index(fields=["payloads_purged_at"], name="execution_retention_under_way",
                         condition=Q(retention_after__isnull=False)),
            models.Index(fields=["version"], name="execution_version"),
            models.Index(fields=["chained_from"], name="execution_chained_from",
                         condition=Q(chained_from__isnull=False)),
            # Search (issue 31 §4, docs/architecture.md "Business keys and tags"): a child by its
            # item key, and executions by tags (one containment, every term at once). Partial:
            # a fan-out without itemKey or tags costs nothing.
            models.Index(fields=["parent", "item_key"], name="execution_child_item_key",
                         condition=Q(item_key__isnull=False)),
            GinIndex(fields=["tags"], opclasses=["jsonb_path_ops"], name="execution_tags",
                     condition=Q(tags__isnull=False)),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def child_key(self) -> str | None:
        if self.item_index is None:
            return None
        return f"{self.parent_id}:{self.spawn_vertex}:{self.item_index}"

    @property
    def last_started_at(self) -> datetime | None:
        """When its latest round began (its first start before any retry)."""
        return self.attempt_started_at or self.started_at

    @property
    def duration(self) -> float | None:
        """The latest round's duration (``total_duration``: from the first start)."""
        if self.last_started_at and self.finished_at:
            return (self.finished_at - self.last_started_at).total_seconds()
        return None

    @property
    def total_duration(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Destination(models.Model):
    """An external system steps call (S11). Its concurrency limit applies to every step of
    every execution that calls it, across all workers."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="destinations")
    name = models.CharField(max_length=100)
    base_url = models.URLField(max_length=500)
    timeout_seconds = models.FloatField(default=10.0)
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: unlimited.")
    rate_per_second = models.FloatField(null=True, blank=True, help_text="Empty: no request-rate limit.")
    # Paused (issue 31): no step calling it is claimed, its limit is kept (flow.EFFECTIVE reads 0).
    paused = models.BooleanField(default=False, db_default=False)
    # A bigger response fails the call (executions/destinations/outbound.py); the default is outbound.DEFAULT_MAX_BYTES.
    max_response_bytes = models.PositiveIntegerField(default=10 * 1024 * 1024, db_default=10 * 1024 * 1024)
    # Sealed with SB_CREDENTIALS_KEY (executions/destinations/credentials.py); never shown, only their kind.
    credentials_sealed = models.TextField(blank=True, default="", db_default="")
    credentials_kind = models.CharField(max_length=10, blank=True, default="", db_default="")
    # Bumped by a trigger (migration 0021) whenever a column a call reads changes (base URL,
    # credentials, timeout, response cap, name): workers compare it with their copies
    # (executions/core/calls.py, "Copies").
    config_version = models.BigIntegerField(default=0, db_default=0)
    # Token bucket for rate_per_second, refilled from database time when slots are claimed.
    rate_tokens = models.FloatField(default=0.0)
    rate_updated_at = models.DateTimeField(db_default=Now())
    # Flow control (issue 29; docs/destinations.md). Settings, written by destinations/rules.py:
    concurrency_mode = models.CharField(max_length=10, default="fixed", db_default="fixed")
    concurrency_min = models.PositiveIntegerField(default=1, db_default=1)
    max_cooldown_seconds = models.FloatField(default=300.0, db_default=300.0)
    max_throttled_waits = models.PositiveIntegerField(default=100, db_default=100)
    breaker = models.JSONField(null=True, blank=True, default=None)
    # ... and the state the engine keeps, written only by executions/core/flow.py:
    cooling_until = models.DateTimeField(null=True, blank=True)  # no call starts before it
    throttle_streak = models.PositiveIntegerField(default=0, db_default=0)  # cooldowns in a row
    # The current limit: adaptive mode's, or fixed mode's ramp after a cooldown (NULL: the limit).
    concurrency_current = models.PositiveIntegerField(null=True, blank=True)
    concurrency_changed_at = models.DateTimeField(null=True, blank=True)
    concurrency_reason = models.CharField(max_length=200, blank=True, default="", db_default="")
    concurrency_throttled_at = models.PositiveIntegerField(null=True, blank=True)  # the limit a cooldown cut
    window_started_at = models.DateTimeField(null=True, blank=True)
    window_bad = models.PositiveIntegerField(default=0, db_default=0)
    window_p90_ms = models.FloatField(null=True, blank=True)  # the last closed window's
    best_p90_ms = models.FloatField(null=True, blank=True)
    breaker_state = models.CharField(max_length=10, default="closed", db_default="closed")
    breaker_open_until = models.DateTimeField(null=True, blank=True)
    breaker_probe_step = models.BigIntegerField(null=True, blank=True)
    breaker_failure_score = models.FloatField(default=0.0, db_default=0.0)  # recent failed share
    breaker_calls = models.FloatField(default=0.0, db_default=0.0)  # recent calls, decayed
    breaker_scored_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="destination_unique_name"),
            models.CheckConstraint(condition=Q(timeout_seconds__gt=0), name="destination_timeout_positive"),
            models.CheckConstraint(condition=Q(rate_per_second__isnull=True) | Q(rate_per_second__gt=0),
                                   name="destination_rate_positive"),
            models.CheckConstraint(condition=Q(max_response_bytes__gte=1), name="destination_response_cap_positive"),
            models.CheckConstraint(condition=Q(concurrency_mode__in=["fixed", "adaptive"]),
                                   name="destination_concurrency_mode"),
            models.CheckConstraint(condition=Q(breaker_state__in=["closed", "open", "half_open"]),
                                   name="destination_breaker_state"),
            models.CheckConstraint(condition=Q(max_cooldown_seconds__gt=0), name="destination_cooldown_positive"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Step(models.Model):
    """One vertex of one execution. At most one step per (execution, vertex): the DSL is
    acyclic, loops are CHAINs."""

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="steps", db_index=False)
    vertex = models.CharField(max_length=64)
    prev_vertex = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: the start vertex
    status = models.CharField(max_length=16, choices=StepStatus.choices, db_default=StepStatus.READY)
    attempt = models.PositiveIntegerField(default=1)
    max_attempts = models.PositiveIntegerField(default=1)
    due_at = models.DateTimeField(db_default=Now())
    wait_reason = models.CharField(max_length=300, blank=True, default="")
    destination = models.ForeignKey(Destination, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                    db_index=False)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # "host:pid" of the worker process holding the lease (for operators and fault tests).
    leased_by = models.CharField(max_length=100, blank=True, db_default="")
    lease_expiries = models.PositiveIntegerField(default=0)
    # A RUNNING destination-bound step either holds one of its destination's slots (S11) or
    # waits in its drain's queue for one (leases.py, "Slots"); only holders count as in flight.
    holds_slot = models.BooleanField(db_default=True)
    # Throttled answers of its destination this round of attempts (they cost no attempt, up to
    # the destination's max_throttled_waits; executions/core/flow.py).
    throttled_waits = models.PositiveIntegerField(default=0, db_default=0)
    # Copied from its execution at insert (records.py) so the fair claim (fairness.py) walks one
    # index per workspace, root and priority; no constraints (each would cost every insert a check).
    # ``workspace`` only on a plain step (no destination): it is the fair claim's key, and the
    # index's predicate (see step_claim_fair); a destination step is claimed per destination.
    workspace = models.ForeignKey(Workspace, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+",
                                  db_index=False, db_constraint=False)
    root = models.ForeignKey(Execution, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+",
                             db_index=False, db_constraint=False)
    priority = models.PositiveSmallIntegerField(db_default=3)
    # Its execution's depth (0: a root), copied like the above: among steps of a root due at the
    # same instant the deeper one is claimed first (fairness.py, "Ties"), not the heap's order.
    depth = models.PositiveSmallIntegerField(db_default=0)
    # Vertex-private progress that must survive redelivery (a spawner's cursor, a timer).
    state = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    # When its latest attempt began (every claim sets it; NULL on rows from before migration 0022).
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["execution", "vertex"], name="step_unique_vertex"),
        ]
        indexes = [
            # The claim predicates (leases.py), one per kind of claim.
            models.Index(fields=["due_at"], name="step_claim_free",
                         condition=Q(status="READY", destination__isnull=True)),
            # The fair claim of plain steps (fairness.py): per workspace, per priority, per root, oldest
            # due first, deeper first among equal due times. Held steps (records.HELD_UNTIL) are left
            # out, so a probe never walks them.
            models.Index(fields=["workspace", "priority", "root", "due_at", "-depth"], name="step_claim_fair",
                         condition=Q(status="READY", workspace__isnull=False,
                                     due_at__lt=datetime(9999, 12, 31, tzinfo=UTC))),
            models.Index(fields=["destination", "due_at"], name="step_claim_destination",
                         condition=Q(status="READY", destination__isnull=False)),
            # The reaper, and in-flight counts per destination (slots).
            models.Index(fields=["lease_expires_at"], name="step_running_lease", condition=Q(status="RUNNING")),
            models.Index(fields=["destination"], name="step_running_destination",
                         condition=Q(status="RUNNING", destination__isnull=False)),
            models.Index(fields=["destination"], name="step_destination", condition=Q(destination__isnull=False)),
            # The timeouts of waits for the outside world (core/waits.py): due WAITING steps.
            models.Index(fields=["due_at"], name="step_waiting_due", condition=Q(status="WAITING")),
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}/{self.vertex}"


class Event(models.Model):
    """Append-only history of every status transition (and a few notes). Database triggers
    refuse UPDATE, and DELETE except by data retention's purge (migration 0016_event_delete_guard)."""

    # No FK constraints here: events are written only by state.py's statements, which select
    # the rows they describe, and a constraint check per event costs the hot path dearly.
    execution = models.ForeignKey(Execution, on_delete=models.DO_NOTHING, related_name="events", db_index=False,
                                  db_constraint=False)
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="events",
                             db_index=False, db_constraint=False)
    vertex = models.CharField(max_length=64, blank=True, default="")
    from_status = models.CharField(max_length=16, blank=True, default="")
    to_status = models.CharField(max_length=16, blank=True, default="")
    attempt = models.PositiveIntegerField(null=True, blank=True)
    message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["execution", "id"], name="event_execution")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.execution_id} {self.vertex} {self.from_status}->{self.to_status}"


class Payload(models.Model):
    """The payload store: an execution's input (name ``input``) and step outputs (name =
    vertex id). Live bytes are summed into PayloadUsage by a statement-level trigger."""

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="payloads", db_index=False)
    name = models.CharField(max_length=64)
    data = models.JSONField(null=True)
    size_bytes = models.PositiveIntegerField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["execution", "name"], name="payload_unique_name")]

    def __str__(self) -> str:
        return f"{self.execution_id}/{self.name} ({self.size_bytes:,} bytes)"


class PayloadUsage(models.Model):
    """Live payload bytes, sharded by backend so concurrent writers rarely share a row;
    the store's size is the sum of the shards. Maintained by triggers only."""

    shard = models.SmallIntegerField(primary_key=True)
    bytes = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"shard {self.shard}: {self.bytes:,} bytes"


class FanOut(models.Model):
    """One SPAWNER step's children: the plan, the spawn cursor, terminal counts and the
    MERGE rule's inputs. Counts move in the same transaction as the children's statuses
    (state.py), so a MERGE is evaluated in O(1), not O(N); the rule itself is SQL over this
    row (merge_rule.py)."""

    step = models.OneToOneField(Step, primary_key=True, on_delete=models.PROTECT, related_name="fanout")
    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="fanouts")
    spawner_vertex = models.CharField(max_length=64)
    merge_vertex = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: no MERGE joins it
    target_version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="+")
    total = models.PositiveIntegerField()
    cursor = models.PositiveIntegerField(default=0, help_text="Next child index to spawn (S3).")
    # itemsPerChild: each child receives this many consecutive items; ``total`` counts children.
    items_per_child = models.PositiveIntegerField(db_default=1)
    created = models.PositiveIntegerField(default=0)
    spawn_complete = models.BooleanField(default=False)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    tolerates_failed = models.BooleanField(default=False)
    tolerates_cancelled = models.BooleanField(default=False)
    max_failure_ratio = models.FloatField(default=1.0)
    allowed_failures = models.PositiveIntegerField(default=0)
    # failureTolerance.maxFailures (NULL: none): allowed_failures is then at most this.
    max_failures = models.PositiveIntegerField(null=True, blank=True)
    fail_fast = models.BooleanField(default=False)
    # A quorum merge's minSuccessful (minSuccessfulRatio × total, rounded up), NULL without one;
    # its fan-out then tolerates every failure up to total − minSuccessful, failFast (merge_rule.py).
    min_successful = models.PositiveIntegerField(null=True, blank=True)
    # maxConcurrency (NULL: no limit). A child is created runnable while a slot is free, else
    # with its first step held (records.HELD_UNTIL); a runnable child that finishes frees its
    # slot and the next held child is released (state.py). A retried child takes a slot back,
    # so free_slots may go below zero until enough children finish. Every held child's index
    # is >= release_cursor, so a release never rescans released children.
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    free_slots = models.IntegerField(db_default=0)
    release_cursor = models.PositiveIntegerField(db_default=0)
    # The payload bytes its children's inputs are expected to take (the stored list's size),
    # counted at plan time so the fan-out never waits on bytes it wrote itself (S7).
    expected_bytes = models.BigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"fan-out {self.spawner_vertex} of {self.execution_id}"


class FanOutItem(models.Model):
    """A SPAWNER's list, exploded once at plan time into one row per item (issue 14 §7), so
    each spawn batch reads its items by key in O(batch) instead of re-reading the whole
    stored list. A batch deletes its rows in the transaction that advances the cursor, so
    the table holds only the items not yet spawned; the rest go with the step (the foreign
    key cascades in the database, migration 0010)."""

    pk = models.CompositePrimaryKey("step_id", "item_index")
    # The constraint is the migration's own (ON DELETE CASCADE, which Django cannot declare).
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    item_index = models.IntegerField()
    item = models.JSONField()

    def __str__(self) -> str:
        return f"item {self.item_index} of step {self.step_id}"


class QuotaUsage(models.Model):
    """Executions started per workspace per UTC day (S6). Reserved with one guarded UPDATE."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+")
    day = models.DateField()
    used = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "day"], name="quota_unique_day")]

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.day}: {self.used:,}"


class FairShare(models.Model):
    """The fair claim's memory of a workspace (executions/core/fairness.py): the credit it is
    owed (deficit round-robin) and the root it served last. Written by the claimer that holds
    the FairClock row."""

    workspace = models.OneToOneField(Workspace, primary_key=True, on_delete=models.CASCADE, related_name="+")
    deficit = models.FloatField(db_default=0.0)
    root_cursor = models.UUIDField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.deficit:.2f}"


class FairClock(models.Model):
    """A single row: the workspace the fair claim served last (its round-robin cursor). A
    claimer locks it (SKIP LOCKED) to update the scheduling state; one that finds it locked
    claims from the state as it is."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    workspace_cursor = models.BigIntegerField(db_default=0)

    def __str__(self) -> str:
        return f"fair clock (after workspace {self.workspace_cursor})"


class DrainKick(models.Model):
    """A single row throttling how often new drain tasks are enqueued (kick.py)."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    last_enqueued_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"drain kick (last {self.last_enqueued_at})"


class WorkerProcess(models.Model):
    """A live worker process, registered at spawn and kept alive by a heartbeat (registry.py).

    The number of rows seen within ``SB_WORKER_TTL_SECONDS`` is the number of drain slots;
    a dead host's rows stop counting when their ``last_seen`` (database time) is older than
    that, and the tick deletes them."""

    host = models.CharField(max_length=200)  # SB_WORKER_NAME, else the host name
    pid = models.IntegerField()
    cluster = models.CharField(max_length=200, blank=True, db_default="")  # "<q cluster name>:<sentinel pid>"
    started = models.DateTimeField(db_default=Now())
    last_seen = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "pid"], name="workerprocess_host_pid_uniq")]

    def __str__(self) -> str:
        return f"{self.host}:{self.pid} (last seen {self.last_seen})"


class DestinationCall(models.Model):
    """One outbound call to a destination: the Rate Limits page's error rate and latency."""

    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="calls", db_index=False)
    step_id = models.BigIntegerField(null=True)
    status_code = models.PositiveSmallIntegerField(null=True)
    ok = models.BooleanField()
    latency_ms = models.FloatField()
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["destination", "-created_at"], name="call_destination_recent")]

    def __str__(self) -> str:
        return f"{self.destination_id} {self.status_code} {self.latency_ms:.0f} ms"


class Schedule(models.Model):
    """Starts a workflow on a cron schedule (executions/services/schedules.py). ``next_run_at`` is the
    next fire time (UTC); a worker claims a due row (``SKIP LOCKED``), starts one execution per
    fire time (its idempotency key names the schedule and the fire time) and moves
    ``next_run_at`` on, in one transaction. NULL while paused."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="schedules")
    name = models.CharField(max_length=100)
    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.PROTECT, related_name="schedules")
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)
    catch_up = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    priority = models.PositiveSmallIntegerField(default=3, db_default=3)  # of the executions it starts
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True, help_text="The last fire time that started an execution.")
    # No foreign key: data lifecycle may delete old executions; the UI links it while it exists.
    last_execution_id = models.UUIDField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="", db_default="")
    # The verified system actor that created or last changed a schedule of a reserved workflow
    # (S15); fires start it as that actor while the actor stays active and covers the key.
    system_actor = models.CharField(max_length=100, blank=True, default="", db_default="")
    created_by = models.CharField(max_length=200, blank=True, default="", db_default="")
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="schedule_unique_name"),
            models.CheckConstraint(condition=Q(enabled=False) | Q(next_run_at__isnull=False),
                                   name="schedule_enabled_has_next_run"),
        ]
        indexes = [models.Index(fields=["next_run_at"], condition=Q(enabled=True), name="schedule_due")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class UploadFormat(models.TextChoices):
    JSONL = "jsonl"  # application/x-ndjson: one JSON value per line
    CSV = "csv"  # text/csv: a header row, then one object of strings per row


class Upload(models.Model):
    """A list of items received as a file (executions/services/uploads.py), kept until a start names
    it (``{"$upload": id}``) and copies it into the execution's input; deleted a retention
    period after its creation or last use. Its items count towards the payload store."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+")
    format = models.CharField(max_length=8, choices=UploadFormat.choices)
    items = models.PositiveBigIntegerField()
    bytes = models.PositiveBigIntegerField(help_text="Bytes of the body received.")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="upload_created")]

    def __str__(self) -> str:
        return f"upload {self.id} ({self.items:,} items)"


class UploadItem(models.Model):
    """One item of an upload, in file order. Live bytes are summed into PayloadUsage by the
    payload store's trigger (migration 0013_uploads), so uploads count towards its capacity."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="+", db_index=False)
    index = models.PositiveIntegerField()
    data = models.JSONField()
    size_bytes = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["upload", "index"], name="upload_item_unique_index")]

    def __str__(self) -> str:
        return f"{self.upload_id}[{self.index}]"


from executions.bulk_models import BulkAction, BulkItem, BulkOperation, BulkOutcome, BulkState  # noqa: E402, F401 - the app's other models
from executions.control_models import FanOutEdit, Pause  # noqa: E402, F401 - the app's other models
from executions.flow_models import DestinationLimit, DestinationSample  # noqa: E402, F401 - the app's other models
from executions.wait_models import ExternalEvent, Wait, WaitKind  # noqa: E402, F401 - the app's other models
