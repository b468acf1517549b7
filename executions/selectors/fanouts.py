"""Reads of fan-outs: progress and the MERGE rule's verdicts per spawner, child counts for a
page of executions, and the long tail of child durations.

Counts come from the FanOut counters plus a grouped count of active children over the
(parent, status) index; the verdicts are the rule's own SQL (merge_rule.py) evaluated by the
database, never recomputed here; percentiles are computed in PostgreSQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions.core import merge_rule
from executions.core.merge_rule import FANOUT_DECIDED, FANOUT_EXCEEDED, FANOUT_FINISHED, FANOUT_REACHED
from executions.models import Execution, FanOut
from workflows.errors import NotFound

STATUSES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "NEVER_STARTED")


@dataclass(frozen=True)
class FanOutView:
    """One spawner's fan-out. ``decided``, ``exceeded`` and ``finished`` are the database's
    verdicts (merge_rule.FANOUT_*); ``done`` counts the children that ended."""

    spawner_vertex: str
    merge_vertex: str | None
    total: int
    created: int
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    never_started: int
    spawn_complete: bool
    explanation: str
    fail_fast: bool
    allowed_failures: int
    max_failure_ratio: float
    tolerated: list[str]
    decided: bool
    exceeded: bool
    finished: bool
    # Of the RUNNING children, those whose open step waits — for a destination's slot (READY
    # and due, or claimed into a worker's queue: leases.py "Slots"), or for a retry's backoff —
    # and so is not running now (the Rate Limits page counts the same way).
    waiting_slot: int = 0
    waiting_retry: int = 0
    min_successful: int | None = None  # a quorum merge's (S26)
    reached: bool = False  # ... and whether that many children succeeded
    # In force now: the version's, or an operator's live edit (issue 31: edits lists them).
    max_concurrency: int | None = None
    max_failures: int | None = None
    edited: bool = False  # an operator edited it: selectors.pauses.fanout_edits lists the edits

    @property
    def running_now(self) -> int:
        return self.running - self.waiting_slot - self.waiting_retry

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    @property
    def active(self) -> bool:
        return bool(self.pending or self.running)

    def counts(self) -> dict[str, int]:
        return {"PENDING": self.pending, "RUNNING": self.running, "SUCCEEDED": self.succeeded,
                "FAILED": self.failed, "CANCELLED": self.cancelled, "NEVER_STARTED": self.never_started}


# An execution's fan-outs (of one spawner, or all), oldest first, with the merge rule's verdicts.
FANOUTS = f"""
    SELECT f.step_id, f.spawner_vertex, f.merge_vertex, f.total, f.created, f.spawn_complete,
           f.succeeded, f.failed, f.cancelled, f.tolerates_failed, f.tolerates_cancelled,
           f.max_failure_ratio, f.allowed_failures, f.fail_fast, f.min_successful, f.max_concurrency, f.max_failures,
           EXISTS (SELECT 1 FROM executions_fanoutedit x WHERE x.fanout_id = f.step_id) AS edited,
           (SELECT count(*) FROM executions_fanout g WHERE g.execution_id = f.execution_id) AS fanouts_of_parent,
           {FANOUT_DECIDED} AS decided, {FANOUT_EXCEEDED} AS exceeded, {FANOUT_FINISHED} AS finished,
           {FANOUT_REACHED} AS reached
    FROM executions_fanout f
    WHERE f.execution_id = %(execution)s AND (%(spawner)s::varchar IS NULL OR f.spawner_vertex = %(spawner)s)
    ORDER BY f.created_at, f.step_id
"""  # noqa: S608 - the merge rule's constant expressions only

# Children of one parent still pending or running, per spawner step and status. The step
# comes from ``%(step)s`` for a parent with one fan-out (``ALONE``): grouped by status alone,
# an index-only scan of execution_parent_status (the heap is not read for children whose page
# is all-visible); several fan-outs group by each child's ``spawned_by_id`` (``BY_SPAWNER``),
# which reads each active child's row.
ACTIVE_CHILDREN = """
    SELECT {step}, c.status, count(*), 0, 0
    FROM executions_execution c
    WHERE c.parent_id = %(parent)s AND c.status IN ('PENDING', 'RUNNING')
    GROUP BY {group}
"""
ALONE = {"step": "%(step)s::bigint", "group": "c.status"}
BY_SPAWNER = {"step": "c.spawned_by_id", "group": "c.spawned_by_id, c.status"}

# The same, and of the RUNNING ones, those whose open step waits — for a destination's slot (READY and due, or
# claimed into a worker's queue: leases.py "Slots") or for a retry's backoff — and so is not
# running now (the Rate Limits page counts in flight and waiting the same way). Their steps
# are read for the RUNNING children only: a probe of the step table per running child, so
# only the fan-out panel, which shows them, asks for it (``waiting=True``).
WAITING_CHILDREN = """
    SELECT c.spawned_by_id, c.status, count(*),
           count(*) FILTER (WHERE w.kind = 'slot'), count(*) FILTER (WHERE w.kind = 'retry')
    FROM executions_execution c
    LEFT JOIN LATERAL (
        SELECT CASE WHEN bool_or(s.status = 'RUNNING' AND s.holds_slot) THEN 'running'
                    WHEN bool_or(s.destination_id IS NOT NULL AND (s.status = 'RUNNING'
                                 OR (s.status = 'READY' AND s.due_at <= now()))) THEN 'slot'
                    WHEN bool_or(s.status = 'READY' AND s.due_at > now()
                                 AND s.wait_reason LIKE 'retry backoff%%') THEN 'retry'
                    ELSE 'running' END AS kind
        FROM executions_step s
        WHERE c.status = 'RUNNING' AND s.execution_id = c.id AND s.status IN ('READY', 'RUNNING')) w ON true
    WHERE c.parent_id = %(parent)s AND c.status IN ('PENDING', 'RUNNING')
    GROUP BY c.spawned_by_id, c.status
"""


def of(execution: Execution, *, waiting: bool = False) -> list[FanOutView]:
    """Every fan-out of ``execution`` (none for an execution without a SPAWNER); ``waiting``:
    with ``waiting_slot`` and ``waiting_retry`` counted (else 0), which reads the open steps of
    every running child."""
    return _views(execution, None, waiting)


def one(execution: Execution, spawner: str, *, waiting: bool = False) -> FanOutView:
    """The fan-out of ``spawner``; NotFound if that vertex has not spawned."""
    found = _views(execution, spawner, waiting)
    if not found:
        raise NotFound(f"execution {execution.pk} has no fan-out '{spawner}'")
    return found[0]


def _views(execution: Execution, spawner: str | None, waiting: bool) -> list[FanOutView]:
    with connection.cursor() as cursor:
        cursor.execute(FANOUTS, {"execution": execution.pk, "spawner": spawner})
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        if not rows:
            return []
        grouping = ALONE if rows[0]["fanouts_of_parent"] == 1 else BY_SPAWNER
        cursor.execute(WAITING_CHILDREN if waiting else ACTIVE_CHILDREN.format(**grouping),
                       {"parent": execution.pk, "step": rows[0]["step_id"]})
        found = cursor.fetchall()
    active = {(step_id, status): n for step_id, status, n, _, _ in found}
    counted = {step_id: (slot, retry) for step_id, status, _, slot, retry in found if status == "RUNNING"}
    return [_view(row, active, counted.get(row["step_id"], (0, 0))) for row in rows]


def _view(row: dict[str, Any], active: dict[tuple[int, str], int], waiting: tuple[int, int]) -> FanOutView:
    return FanOutView(
        spawner_vertex=row["spawner_vertex"], merge_vertex=row["merge_vertex"], total=row["total"],
        created=row["created"], pending=active.get((row["step_id"], "PENDING"), 0),
        running=active.get((row["step_id"], "RUNNING"), 0), succeeded=row["succeeded"], failed=row["failed"],
        cancelled=row["cancelled"], never_started=row["total"] - row["created"],
        spawn_complete=row["spawn_complete"], explanation=merge_rule.explain(row), fail_fast=row["fail_fast"],
        allowed_failures=row["allowed_failures"], max_failure_ratio=row["max_failure_ratio"],
        tolerated=[s for s, on in (("FAILED", row["tolerates_failed"]), ("CANCELLED", row["tolerates_cancelled"]))
                   if on],
        decided=row["decided"], exceeded=row["exceeded"], finished=row["finished"],
        waiting_slot=waiting[0], waiting_retry=waiting[1],
        min_successful=row["min_successful"], reached=row["reached"],
        max_concurrency=row["max_concurrency"], max_failures=row["max_failures"], edited=row["edited"],
    )


# --- counts for a page of executions ------------------------------------------------------------

# Children of several parents still pending or running, per parent and status.
ACTIVE_CHILDREN_OF = """
    SELECT parent_id, status, count(*) FROM executions_execution
    WHERE parent_id = ANY(%(parents)s) AND status IN ('PENDING', 'RUNNING')
    GROUP BY parent_id, status
"""


def with_counts(executions: list[Execution]) -> list[Execution]:
    """Set ``counts`` (status → children, summed over its fan-outs) on each execution that
    spawned children, None on the others: two queries for the whole list."""
    totals: dict[uuid.UUID, dict[str, int]] = {}
    for fan in FanOut.objects.filter(execution_id__in=[e.pk for e in executions]):
        counts = totals.setdefault(fan.execution_id, dict.fromkeys(STATUSES, 0))
        counts["SUCCEEDED"] += fan.succeeded
        counts["FAILED"] += fan.failed
        counts["CANCELLED"] += fan.cancelled
        counts["NEVER_STARTED"] += fan.total - fan.created
    if totals:
        with connection.cursor() as cursor:
            cursor.execute(ACTIVE_CHILDREN_OF, {"parents": list(totals)})
            for parent_id, status, n in cursor.fetchall():
                totals[parent_id][status] += n
    for execution in executions:
        execution.counts = totals.get(execution.pk)  # type: ignore[attr-defined] # read by the API serializer
    return executions


# --- long tail ----------------------------------------------------------------------------------

# A child's duration: its latest round's (an operator's retry restarts the clock), as the
# index execution_child_round_duration orders them.
TOOK = "finished_at - coalesce(attempt_started_at, started_at)"

# Finished children's durations in one sort: how many, p50/p95/p99 (float seconds) and the max.
TAIL_STATS = f"""
    SELECT count(*), percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY d), max(d)
    FROM (SELECT date_part('epoch', {TOOK}) AS d FROM executions_execution
          WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL) x
"""  # noqa: S608 - a constant expression

# Finished children per duration bucket (equal widths from 0 to ``top``).
TAIL_HISTOGRAM = f"""
    SELECT width_bucket(date_part('epoch', {TOOK}), 0, %(top)s, %(buckets)s), count(*)
    FROM executions_execution
    WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL
    GROUP BY 1
"""  # noqa: S608 - a constant expression

# The ten slowest finished children, searched only among those at least ``at_least`` seconds long.
TAIL_SLOWEST = f"""
    SELECT id, item_index, status, date_part('epoch', {TOOK}) FROM executions_execution
    WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL
      AND {TOOK} >= make_interval(secs => %(at_least)s)
    ORDER BY {TOOK} DESC, item_index LIMIT 10
"""  # noqa: S608 - a constant expression


@dataclass(frozen=True)
class Slow:
    id: Any
    item_index: int | None
    status: str
    seconds: float


@dataclass(frozen=True)
class Tail:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    buckets: list[tuple[float, float, int]]  # (from seconds, to seconds, children)
    slowest: list[Slow]


def long_tail(parent_id: Any, *, buckets: int = 20) -> Tail:
    """Durations of a parent's finished children: percentiles, a histogram, the ten slowest
    (searched only at or above p99 once there are 1,000 children: at least ten are there)."""
    with connection.cursor() as cursor:
        cursor.execute(TAIL_STATS, {"parent": parent_id})
        count, percentiles, top = cursor.fetchone()
        if not count:
            return Tail(0, None, None, None, None, [], [])
        p50, p95, p99 = (float(p) for p in percentiles)
        width = float(top) / buckets or 1.0
        cursor.execute(TAIL_HISTOGRAM, {"parent": parent_id, "top": width * buckets * 1.000001, "buckets": buckets})
        counts = dict(cursor.fetchall())
        cursor.execute(TAIL_SLOWEST, {"parent": parent_id, "at_least": p99 if count >= 1000 else 0.0})
        slowest = [Slow(*row) for row in cursor.fetchall()]
    histogram = [((b - 1) * width, b * width, int(counts.get(b, 0))) for b in range(1, buckets + 1)]
    return Tail(int(count), p50, p95, p99, float(top), histogram, slowest)
