"""Data lifecycle (S19): payload retention and the purge of whole finished trees.

A *tree* is a root execution (one with no parent; a chained execution is a root of its own)
and every execution under it (``root_id``). A tree is finished when none of its executions
is PENDING or RUNNING — a spawner without a MERGE lets its parent end while children run,
and a retried child re-opens a finished tree, so the root's status alone does not say it.

One pass (``run_pass``; ``manage.py sb_gc`` and the scheduled tick) does, oldest first:

1. **Purge** finished trees whose root ended more than ``SB_RETENTION_SECONDS`` ago, whatever
   their outcome: their executions, steps, events, fan-out rows and payloads, bottom-up (the
   deepest executions first), ``RETENTION_BATCH`` executions per transaction, so a purge cut
   short leaves a consistent, smaller tree that the next pass finishes. Audit events
   (workflows_auditevent) are never purged. An execution chained from a purged one stays;
   its ``chained_from`` becomes empty.
2. **Payloads** of finished SUCCEEDED trees whose root ended more than
   ``SB_PAYLOAD_RETENTION_SECONDS`` ago: deleted in the tree's (depth, id) order, one batch
   per transaction, with the position kept on the root (``retention_depth``,
   ``retention_after``) so the next pass resumes there. FAILED and CANCELLED trees keep their
   payloads (they stay retryable) until the purge takes the whole tree.
3. **Call log**: destination call rows older than ``SB_CALL_LOG_RETENTION_SECONDS``, per
   destination, oldest first, ``RETENTION_BATCH`` rows per transaction (they carry a step id
   but no key to it, so the purge of a tree does not reach them).

Progress: a root leaves the candidate index as soon as its payloads are marked for deletion
(``payloads_purged_at``) or it is purged, so no pass selects an emptied or purged tree again;
a tree still running is skipped and the pass goes on past it. Every statement is driven by an
index (partial indexes on finished roots, the tree index ``(root_id, depth, id)``).

Retries. Before retention touches a tree it *freezes* it: it locks the root, checks in a fresh
snapshot that nothing in the tree is unfinished, and stamps ``payloads_purged_at``. A retry
locks the root (``FOR SHARE``) last, after its own state changes, and is refused if the stamp
is there (``require_payloads``): either the retry committed first, and the freeze sees an
unfinished execution and leaves the tree alone, or the freeze did, and the retry rolls back.
So nothing ever runs with a purged input.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from executions.core import calls as call_log
from executions.core import flow_history
from workflows.errors import Conflict

ZERO = uuid.UUID(int=0)

# --- named queries ----------------------------------------------------------------------------

# Finished roots older than the age, in (finished_at, id) order after a keyset position; both
# match a partial index on finished roots (execution_finished_roots, execution_payload_retention).
PURGE_CANDIDATES = """
    SELECT r.id, r.finished_at FROM executions_execution r
    WHERE r.parent_id IS NULL AND r.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
      AND r.finished_at < now() - make_interval(secs => %(age)s)
      AND (r.finished_at, r.id) > (%(after_at)s::timestamptz, %(after_id)s::uuid)
    ORDER BY r.finished_at, r.id
    LIMIT %(limit)s
"""

PAYLOAD_CANDIDATES = """
    SELECT r.id, r.finished_at FROM executions_execution r
    WHERE r.parent_id IS NULL AND r.status = 'SUCCEEDED' AND r.payloads_purged_at IS NULL
      AND r.finished_at < now() - make_interval(secs => %(age)s)
      AND (r.finished_at, r.id) > (%(after_at)s::timestamptz, %(after_id)s::uuid)
    ORDER BY r.finished_at, r.id
    LIMIT %(limit)s
"""

# Trees whose payload deletion is under way (a pass ended in the middle of one).
UNDER_WAY = """
    SELECT r.id FROM executions_execution r WHERE r.retention_after IS NOT NULL
    ORDER BY r.payloads_purged_at, r.id
    LIMIT %(limit)s
"""

LOCK_ROOT = "SELECT id FROM executions_execution WHERE id = %(root)s FOR UPDATE"

_FINISHED_TREE = """
    NOT EXISTS (SELECT 1 FROM executions_execution d
                WHERE d.root_id = r.id AND d.status IN ('PENDING', 'RUNNING'))
"""

# Freeze a finished tree for the purge (the stamp may be there already: payloads went first).
FREEZE_FOR_PURGE = f"""
    UPDATE executions_execution r SET payloads_purged_at = coalesce(r.payloads_purged_at, now())
    WHERE r.id = %(root)s AND {_FINISHED_TREE}
    RETURNING r.id
"""  # noqa: S608 - constant SQL fragments only

# Freeze a finished SUCCEEDED tree for its payloads, and start its keyset at the beginning.
FREEZE_FOR_PAYLOADS = f"""
    UPDATE executions_execution r
    SET payloads_purged_at = now(), retention_depth = -1, retention_after = %(zero)s
    WHERE r.id = %(root)s AND r.status = 'SUCCEEDED' AND r.payloads_purged_at IS NULL AND {_FINISHED_TREE}
    RETURNING r.id
"""  # noqa: S608 - constant SQL fragments only

# The deepest executions left in a tree (the index execution_root_tree, read backwards).
TREE_BOTTOM = """
    SELECT id FROM executions_execution WHERE root_id = %(root)s
    ORDER BY depth DESC, id DESC
    LIMIT %(limit)s
"""

# The next executions of a tree after a keyset position (depth, id).
TREE_AFTER = """
    SELECT depth, id FROM executions_execution
    WHERE root_id = %(root)s AND (depth, id) > (%(depth)s, %(after)s::uuid)
    ORDER BY depth, id
    LIMIT %(limit)s
"""

RETENTION_POSITION = "SELECT retention_depth, retention_after FROM executions_execution WHERE id = %(root)s"

ADVANCE = """
    UPDATE executions_execution SET retention_depth = %(depth)s, retention_after = %(after)s WHERE id = %(root)s
"""

DELETE_PAYLOADS = """
    WITH gone AS (DELETE FROM executions_payload WHERE execution_id = ANY(%(ids)s::uuid[]) RETURNING size_bytes)
    SELECT count(*), coalesce(sum(size_bytes), 0) FROM gone
"""

# An execution outside the batch that was chained from one in it keeps running on its own.
UNCHAIN = """
    UPDATE executions_execution SET chained_from_id = NULL
    WHERE chained_from_id = ANY(%(ids)s::uuid[]) AND NOT (id = ANY(%(ids)s::uuid[]))
"""

# Events are append-only; a trigger lets this transaction delete them (migration 0016_event_delete_guard).
SANCTION = "SELECT set_config('schemabridge.retention', 'on', true)"

# Each keyed by an index on the execution id; foreign keys are checked at commit (deferred).
DELETE_TREE_ROWS = (
    "DELETE FROM executions_event WHERE execution_id = ANY(%(ids)s::uuid[])",
    # An operator's fan-out edits and pauses (issue 31) go with their fan-outs and executions.
    "DELETE FROM executions_fanoutedit WHERE fanout_id IN (SELECT step_id FROM executions_fanout"
    " WHERE execution_id = ANY(%(ids)s::uuid[]))",
    "DELETE FROM executions_pause WHERE execution_id = ANY(%(ids)s::uuid[])",
    "DELETE FROM executions_fanout WHERE execution_id = ANY(%(ids)s::uuid[])",
    "DELETE FROM executions_step WHERE execution_id = ANY(%(ids)s::uuid[])",
    "DELETE FROM executions_execution WHERE id = ANY(%(ids)s::uuid[])",
)

# The roots of the executions a retry moves, locked after the retry's own state changes.
ROOTS_FOR_RETRY = """
    SELECT r.id, r.status, r.finished_at, r.payloads_purged_at FROM executions_execution r
    WHERE r.id IN (SELECT coalesce(e.root_id, e.id) FROM executions_execution e WHERE e.id = ANY(%(ids)s::uuid[]))
    ORDER BY r.id
    FOR SHARE OF r
"""


# --- the pass -----------------------------------------------------------------------------------

@dataclass
class Report:
    """What one pass did (``sb_gc --json`` prints exactly these keys)."""

    trees_purged: int = 0
    executions_deleted: int = 0
    payloads_deleted: int = 0
    bytes_freed: int = 0
    seconds: float = 0.0
    calls_deleted: int = 0  # not among sb_gc's printed keys; the tick reports it

    def as_dict(self) -> dict[str, Any]:
        figures = asdict(self)
        del figures["calls_deleted"]
        return figures


class _Budget:
    """A pass without a limit runs until nothing is eligible; with one it stops between
    batches once the time is spent (the next pass resumes where it stopped)."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def run_pass(*, max_seconds: float | None = None, batch: int | None = None) -> Report:
    """One retention pass: purge old finished trees, then delete the payloads of old
    SUCCEEDED trees (see the module doc). ``max_seconds`` bounds it (the tick); without it
    the pass runs until nothing is eligible (``sb_gc``)."""
    started = time.monotonic()
    report = Report()
    budget = _Budget(max_seconds)
    size = int(batch or settings.SB["RETENTION_BATCH"])
    _purge_trees(report, budget, size)
    _resume_payloads(report, budget, size)
    _delete_payloads(report, budget, size)
    _purge_call_log(report, budget, size)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _purge_call_log(report: Report, budget: _Budget, size: int) -> None:
    age = float(settings.SB["CALL_LOG_RETENTION_SECONDS"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM executions_destination ORDER BY id")
        destination_ids = [row[0] for row in cursor.fetchall()]
    for destination_id in destination_ids:
        while not budget.spent():
            with transaction.atomic(), connection.cursor() as cursor:
                deleted = call_log.purge_calls(cursor, destination_id, age_seconds=age, limit=size)
            report.calls_deleted += deleted
            if deleted < size:
                break
    if not budget.spent():  # the charts' history (limits, samples) goes with the call log
        with transaction.atomic(), connection.cursor() as cursor:
            flow_history.purge(cursor, age_seconds=age)


def _candidates(sql: str, age: float, limit: int) -> Any:
    """Candidate roots in (finished_at, id) order, page by page, read in fresh statements."""
    after: tuple[Any, Any] = ("-infinity", ZERO)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, {"age": age, "after_at": after[0], "after_id": after[1], "limit": limit})
            rows = cursor.fetchall()
        for root, finished_at in rows:
            yield root
            after = (finished_at, root)
        if len(rows) < limit:
            return


def _freeze(sql: str, root: uuid.UUID) -> bool:
    """Stamp a finished tree (see "Retries" in the module doc); False: it is not finished."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(LOCK_ROOT, {"root": root})
        if cursor.fetchone() is None:
            return False
        # A new statement, so a new snapshot: a retry that committed while we waited is seen.
        cursor.execute(sql, {"root": root, "zero": ZERO})
        return cursor.fetchone() is not None


def _purge_trees(report: Report, budget: _Budget, size: int) -> None:
    age = float(settings.SB["RETENTION_SECONDS"])
    for root in _candidates(PURGE_CANDIDATES, age, size):
        if budget.spent():
            return
        if _freeze(FREEZE_FOR_PURGE, root) and _purge_tree(report, root, budget, size):
            report.trees_purged += 1


def _purge_tree(report: Report, root: uuid.UUID, budget: _Budget, size: int) -> bool:
    """Delete a frozen tree bottom-up, a batch per transaction; True when it is gone."""
    while not budget.spent():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(TREE_BOTTOM, {"root": root, "limit": size})
            ids = [row[0] for row in cursor.fetchall()]
            if not ids:
                return True
            _delete_payload_rows(cursor, ids, report)
            cursor.execute(UNCHAIN, {"ids": ids})
            cursor.execute(SANCTION)
            for sql in DELETE_TREE_ROWS:
                cursor.execute(sql, {"ids": ids})
            report.executions_deleted += cursor.rowcount
        if root in ids:
            return True
    return False


def _delete_payload_rows(cursor: Any, ids: Sequence[uuid.UUID], report: Report) -> None:
    cursor.execute(DELETE_PAYLOADS, {"ids": list(ids)})
    count, size = cursor.fetchone()
    report.payloads_deleted += int(count)
    report.bytes_freed += int(size)


def _resume_payloads(report: Report, budget: _Budget, size: int) -> None:
    while not budget.spent():
        with connection.cursor() as cursor:
            cursor.execute(UNDER_WAY, {"limit": size})
            roots = [row[0] for row in cursor.fetchall()]
        for root in roots:
            if not _tree_payloads(report, root, budget, size):
                return
        if len(roots) < size:
            return


def _delete_payloads(report: Report, budget: _Budget, size: int) -> None:
    age = float(settings.SB["PAYLOAD_RETENTION_SECONDS"])
    for root in _candidates(PAYLOAD_CANDIDATES, age, size):
        if budget.spent():
            return
        if _freeze(FREEZE_FOR_PAYLOADS, root) and not _tree_payloads(report, root, budget, size):
            return


def _tree_payloads(report: Report, root: uuid.UUID, budget: _Budget, size: int) -> bool:
    """Delete a frozen tree's payloads from its keyset position on; True when done."""
    while not budget.spent():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RETENTION_POSITION, {"root": root})
            position = cursor.fetchone()
            if position is None or position[1] is None:
                return True  # purged meanwhile, or finished by another pass
            cursor.execute(TREE_AFTER, {"root": root, "depth": position[0], "after": position[1], "limit": size})
            rows = cursor.fetchall()
            _delete_payload_rows(cursor, [row[1] for row in rows], report)
            done = len(rows) < size
            last = rows[-1] if rows else (None, None)
            cursor.execute(ADVANCE, {"root": root, "depth": None if done else last[0],
                                     "after": None if done else last[1]})
        if done:
            return True
    return False


# --- retries ------------------------------------------------------------------------------------

def require_payloads(cursor: Any, execution_ids: Sequence[Any]) -> None:
    """Inside a retry's transaction, after its state changes: refuse (``Conflict``, so the
    transaction rolls back) if retention has begun to delete the payloads of the tree of any
    of ``execution_ids`` — the retried steps would run without their input."""
    cursor.execute(ROOTS_FOR_RETRY, {"ids": list(execution_ids)})
    for root, status, finished_at, purged_at in cursor.fetchall():
        if purged_at is not None:
            raise Conflict(purged_message(root, status, finished_at, purged_at))


def purged_message(root: Any, status: str, finished_at: Any, purged_at: Any) -> str:
    ended = f" {status} at {finished_at.isoformat(timespec='seconds')} and" if finished_at else ""
    return (f"cannot retry: the payloads of its tree were deleted at {purged_at.isoformat(timespec='seconds')} "
            f"by data retention (the tree's root {root}{ended} is past its retention age), so its input "
            "is gone and it cannot run again")


def dry_run(work: Callable[[], Report]) -> Report:
    """Run ``work`` in one transaction and roll it back: the figures of a real pass, nothing
    deleted."""
    result: list[Report] = []

    class _RollBack(Exception):
        pass

    try:
        with transaction.atomic():
            result.append(work())
            raise _RollBack
    except _RollBack:
        pass
    return result[0]
