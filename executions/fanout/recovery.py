"""Retrying the failed children of a parent (S9, S16, S28): what is re-run, and its preview.

"Retry all failed" (UI), ``retry-failed`` (API) and retrying a SPAWNER step whose merge failed
re-run, per fan-out:

* every FAILED child with a FAILED step (same id, same key, a new round: S16) — children
  that failed on a FAIL vertex (no failed step) or as a bad item (no step, S17) are not;
* when the fan-out's MERGE step is FAILED: every child the failFast policy cancelled
  (``cancel_cause = 'failFast'``, at any depth under it, through failFast-cancelled
  ancestors only), their CANCELLED steps → READY — never a child an operator cancelled;
* then, if at least one child of the fan-out was re-run, its spawner step when failFast
  stopped it early (SUCCEEDED with items left): it resumes at its cursor and spawns the
  never-started items on their per-item keys (``ON CONFLICT DO NOTHING``), exactly once.

The children's transitions move the fan-out's counters (a CANCELLED child leaving CANCELLED
counts like a FAILED one leaving FAILED) and re-open the failed merge and its parent (redrive,
state.py). Everything is one transaction, in the lock order of docs/architecture.md: first
the parent's failFast lock (core/cancel.py), so a failFast sweep batch in flight commits
before this retry reads what to re-run, and the sweep's later batches see the fan-out this
retry re-opened and stop; then the deepest re-run executions (their steps, then them), then
the children (steps, then executions — whose counters lock the fan-out row, then the merge
step and the parent), and only then the stopped spawner step, which no worker holds (a
spawner still running is not selected: it sees the re-opened fan-out at its next batch,
fanout.py). A tree whose payloads retention has begun to purge is refused (S19), and the
transaction rolls back.

``preview`` counts the same rows with the same predicates, without moving any (and without
reading them into Python).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from executions.core import cancel, retention, retry, state, versions

# The fan-outs of a parent (of one spawner, if given), with their spawner step's status, the
# status of their MERGE step (NULL: none yet), and the items the spawner has not walked.
FANOUTS = """
    SELECT f.step_id, f.spawner_vertex, sp.status AS spawner_status, m.status AS merge_status,
           f.total - f.cursor AS unwalked, f.spawn_complete, p.version_id AS parent_version
    FROM executions_fanout f
    JOIN executions_execution p ON p.id = f.execution_id
    JOIN executions_step sp ON sp.id = f.step_id
    LEFT JOIN executions_step m ON m.execution_id = f.execution_id AND m.vertex = f.merge_vertex
    WHERE f.execution_id = %(parent)s AND (%(spawner)s::varchar IS NULL OR f.spawner_vertex = %(spawner)s)
    ORDER BY f.step_id
"""

# FAILED children of some fan-outs that have a FAILED step to retry, with that step.
FAILED_CHILDREN = """
    SELECT c.id, c.spawned_by_id, c.version_id, s.id AS step_id, s.vertex
    FROM executions_execution c
    JOIN executions_step s ON s.execution_id = c.id AND s.status = 'FAILED'
    WHERE c.parent_id = %(parent)s AND c.status = 'FAILED' AND c.spawned_by_id = ANY(%(fanouts)s::bigint[])
      AND (%(only)s::uuid[] IS NULL OR c.id = ANY(%(only)s::uuid[]))
    ORDER BY s.id
"""

# The preview's counts per fan-out, with the predicates of FAILED_CHILDREN and of the first
# level of FAIL_FAST_CANCELLED (only ``cancelled_fanouts`` count their cancelled children).
PREVIEW_COUNTS = """
    SELECT c.spawned_by_id,
           count(*) FILTER (WHERE c.status = 'FAILED') AS failed,
           count(*) FILTER (WHERE c.status = 'CANCELLED') AS cancelled
    FROM executions_execution c
    WHERE c.parent_id = %(parent)s AND c.spawned_by_id = ANY(%(fanouts)s::bigint[])
      AND ((c.status = 'FAILED'
            AND EXISTS (SELECT 1 FROM executions_step s WHERE s.execution_id = c.id AND s.status = 'FAILED'))
        OR (c.status = 'CANCELLED' AND c.cancel_cause = 'failFast' AND c.spawned_by_id = ANY(%(cancelled_fanouts)s)
            AND EXISTS (SELECT 1 FROM executions_step s WHERE s.execution_id = c.id AND s.status = 'CANCELLED')))
    GROUP BY c.spawned_by_id
"""

# Executions the failFast policy cancelled under some fan-outs, at any depth, descending only
# through executions it cancelled; each with its depth below the parent and a CANCELLED step
# to re-run (an execution without one would have nothing to run).
FAIL_FAST_CANCELLED = """
    WITH RECURSIVE d AS (
        SELECT c.id, c.spawned_by_id AS fanout, c.version_id, 1 AS level, c.spawned_by_id AS own, c.item_index
        FROM executions_execution c
        WHERE c.parent_id = %(parent)s AND c.status = 'CANCELLED' AND c.cancel_cause = 'failFast'
          AND c.spawned_by_id = ANY(%(fanouts)s::bigint[])
          AND (%(only)s::uuid[] IS NULL OR c.id = ANY(%(only)s::uuid[]))
        UNION ALL
        SELECT e.id, d.fanout, e.version_id, d.level + 1, e.spawned_by_id, e.item_index
        FROM executions_execution e JOIN d ON e.parent_id = d.id
        WHERE e.status = 'CANCELLED' AND e.cancel_cause = 'failFast'
    )
    SELECT d.id, d.fanout, d.version_id, d.level, d.own, d.item_index FROM d
    WHERE EXISTS (SELECT 1 FROM executions_step s WHERE s.execution_id = d.id AND s.status = 'CANCELLED')
    ORDER BY d.level DESC, d.id
"""


@dataclass(frozen=True)
class Counts:
    """What a retry of the failed children re-runs: ``failed`` FAILED children and
    ``cancelled_by_fail_fast`` children the failFast policy cancelled (its direct children;
    their own failFast-cancelled descendants are re-run with them), and ``never_started``
    items its re-opened spawners will spawn."""

    failed: int = 0
    cancelled_by_fail_fast: int = 0
    never_started: int = 0

    @property
    def retried(self) -> int:
        return self.failed + self.cancelled_by_fail_fast


@dataclass
class _Plan:
    fanouts: list[dict[str, Any]]
    failed: list[tuple[Any, ...]]  # (child, fan-out step, version, failed step, vertex)
    # (execution, fan-out step of the parent's, version, level below the parent, its own
    # fan-out step, its item index)
    cancelled: list[tuple[Any, ...]]

    def children(self) -> list[tuple[Any, ...]]:
        return [row for row in self.cancelled if row[3] == 1]

    def stopped(self, fanouts: set[int]) -> list[dict[str, Any]]:
        """The spawners of ``fanouts`` that failFast stopped with items left to spawn."""
        return [f for f in self.fanouts if f["step_id"] in fanouts and f["spawner_status"] == "SUCCEEDED"
                and not f["spawn_complete"] and f["unwalked"] > 0]


def _fetch(cursor: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor.execute(sql, params)
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _plan(cursor: Any, parent: uuid.UUID, spawner: str | None, only: list[uuid.UUID] | None) -> _Plan:
    fanouts = _fetch(cursor, FANOUTS, {"parent": parent, "spawner": spawner})
    if not fanouts:
        return _Plan([], [], [])
    cursor.execute(FAILED_CHILDREN, {"parent": parent, "fanouts": [f["step_id"] for f in fanouts], "only": only})
    failed = list(cursor.fetchall())
    merge_failed = [f["step_id"] for f in fanouts if f["merge_status"] == "FAILED"]
    cancelled: list[tuple[Any, ...]] = []
    if merge_failed:
        cursor.execute(FAIL_FAST_CANCELLED, {"parent": parent, "fanouts": merge_failed, "only": only})
        cancelled = list(cursor.fetchall())
    return _Plan(fanouts, failed, cancelled)


def preview(cursor: Any, parent: uuid.UUID, *, spawner: str | None = None) -> Counts:
    """What ``retry_children`` would re-run and spawn now (nothing is moved), counted in the
    database: one grouped count over the children's (parent, status) index."""
    fanouts = _fetch(cursor, FANOUTS, {"parent": parent, "spawner": spawner})
    if not fanouts:
        return Counts()
    cursor.execute(PREVIEW_COUNTS, {"parent": parent, "fanouts": [f["step_id"] for f in fanouts],
                                    "cancelled_fanouts": [f["step_id"] for f in fanouts
                                                          if f["merge_status"] == "FAILED"]})
    per_fanout = {fanout: (failed, cancelled) for fanout, failed, cancelled in cursor.fetchall()}
    plan = _Plan(fanouts, [], [])
    return Counts(sum(n[0] for n in per_fanout.values()), sum(n[1] for n in per_fanout.values()),
                  sum(f["unwalked"] for f in plan.stopped({k for k, n in per_fanout.items() if n[0] or n[1]})))


def _budgets(cursor: Any, version_ids: set[int]) -> dict[tuple[int, str], int]:
    """The retry budget (maxAttempts) of every vertex of these versions."""
    return {(vid, vertex.id): retry.max_attempts(vertex)
            for vid, loaded in versions.load_versions(cursor, sorted(version_ids)).items()
            for vertex in loaded.workflow.vertices.values()}


def _table(budgets: dict[tuple[int, str], int]) -> tuple[list[int], list[str], list[int]]:
    keys = sorted(budgets)
    return [k[0] for k in keys], [k[1] for k in keys], [budgets[k] for k in keys]


def retry_children(cursor: Any, parent: uuid.UUID, *, spawner: str | None, message: str) -> Counts:
    """Re-run the failed (and failFast-cancelled) children of ``parent``'s fan-outs (of
    ``spawner`` only, if given) and re-open the spawners failFast stopped, inside the
    caller's transaction; returns what moved. Raises ``Conflict`` (S19) when the tree's
    payloads are being purged — the caller's transaction then rolls back."""
    return _retry(cursor, parent, spawner, message, None)[0]


def retry_some(cursor: Any, parent: uuid.UUID, children: list[uuid.UUID], *, message: str) -> set[uuid.UUID]:
    """``retry_children`` restricted to ``children`` (a bulk retry's batch, services/bulk.py):
    the same rules, locks and redrive, for those of them it re-runs; returns which it re-ran."""
    return _retry(cursor, parent, None, message, children)[1]


def _retry(cursor: Any, parent: uuid.UUID, spawner: str | None, message: str,
           only: list[uuid.UUID] | None) -> tuple[Counts, set[uuid.UUID]]:
    cancel.lock_fail_fast(cursor, parent)  # first; the plan is read after it, in a fresh snapshot
    plan = _plan(cursor, parent, spawner, only)
    if not plan.failed and not plan.cancelled:
        return Counts(), set()
    budgets = _budgets(cursor, {row[2] for row in plan.failed} | {row[2] for row in plan.cancelled}
                       | {f["parent_version"] for f in plan.fanouts})
    table = _table(budgets)
    deeper = [row for row in plan.cancelled if row[3] > 1]
    for level in sorted({row[3] for row in deeper}, reverse=True):  # deepest first (lock order)
        rows = [row for row in deeper if row[3] == level]
        moved = state.rerun_cancelled_steps(cursor, [row[0] for row in rows], budgets=table, message=message)
        state.rerun_cancelled_executions(cursor, sorted({row["execution_id"] for row in moved}), message=message)
        state.rewind_release(cursor, _held_lowest(rows, moved))
    # The children: their steps, then them (whose counters re-open the merge and the parent).
    failed_steps = state.retry_failed_steps(cursor, [row[3] for row in plan.failed],
                                            budgets=[budgets.get((row[2], row[4]), 1) for row in plan.failed],
                                            message=message)
    cancelled_steps = state.rerun_cancelled_steps(cursor, [row[0] for row in plan.children()], budgets=table,
                                                  message=message)
    failed_ids = sorted({row["execution_id"] for row in failed_steps})
    cancelled_ids = sorted({row["execution_id"] for row in cancelled_steps})
    counts = state.FanoutCounts()  # the counters move once, for both: no verdict in between
    failed = state.retry_executions(cursor, failed_ids, message=message, counts=counts)
    cancelled = state.rerun_cancelled_executions(cursor, cancelled_ids, message=message, counts=counts)
    counts.apply(cursor)
    state.rewind_release(cursor, _held_lowest(plan.children(), cancelled_steps))
    fanout_of = {row[0]: row[1] for row in [*plan.failed, *plan.children()]}
    never_started = _reopen_spawners(cursor, plan, {fanout_of[i] for i in [*failed_ids, *cancelled_ids]},
                                     budgets, message)
    retention.require_payloads(cursor, [parent, *failed_ids, *cancelled_ids])  # S19: never run without input
    return Counts(failed, cancelled, never_started), {*failed_ids, *cancelled_ids}


def _held_lowest(rows: list[tuple[Any, ...]], moved: list[dict[str, Any]]) -> dict[int, int]:
    """Per own fan-out, the lowest item index of the re-run executions whose first step
    stayed held (maxConcurrency)."""
    held = {row["execution_id"] for row in moved if row["held"]}
    lowest: dict[int, int] = {}
    for row in rows:
        if row[0] in held:
            lowest[row[4]] = min(lowest.get(row[4], row[5]), row[5])
    return lowest


def _reopen_spawners(cursor: Any, plan: _Plan, fanouts: set[int], budgets: dict[tuple[int, str], int],
                     message: str) -> int:
    """Re-open the spawners failFast stopped among ``fanouts`` (those with a child re-run);
    returns how many items they will spawn."""
    stopped = plan.stopped(fanouts)
    if not stopped:
        return 0
    moved = {row["id"] for row in state.reopen_stopped_spawners(
        cursor, [f["step_id"] for f in stopped],
        budgets=[budgets.get((f["parent_version"], f["spawner_vertex"]), 1) for f in stopped],
        message=f"{message}: spawns the items never started")}
    return sum(f["unwalked"] for f in stopped if f["step_id"] in moved)
