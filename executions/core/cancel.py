"""Cancelling trees (S18): after a cancel returns, nothing under it is left to run.

A cancel works in two phases, each in its own transactions, so it never holds a lock that
a child's completion or a spawn batch needs while it waits for one of theirs:

1. **Seal** the target: its unfinished steps (``cancel_steps``), then it, → CANCELLED
   (services/lifecycle.py). Its SPAWNER step is among them, so a spawn batch in flight
   either commits before the seal takes the step's lock, or finds its lease gone at its next
   batch (leases.fence): from then on the spawner creates nothing.
2. **Sweep** the descendants (``cancel_descendants``): read the unfinished ones at any depth
   — in a fresh snapshot, so children a spawn batch committed during phase 1 are seen — and
   cancel their steps (``cancel_steps``: until none is open, so also a next step that a
   drain's commit in flight created), then them, in bounded batches, until a pass finds
   none. Cancelling a child seals its own spawners the same way, so the sweep ends.

Each transaction follows the lock order of state.py (a child's rows before its parent's
fan-out row and steps), and is retried when PostgreSQL picks it as a deadlock victim.

**The failFast sweep** (cause failFast: the merge's before it fails, the spawner's after its
stop) and a **retry of the parent's failed children** (S28, ``fanout/recovery.py``: the API's
``retry-failed``, the UI's "Retry all failed", retrying the spawner step) exclude each other
through the parent's *failFast lock* (``lock_fail_fast``): a transaction-level advisory lock
keyed by the parent execution, which each sweep batch and each such retry takes as its first
lock, and nothing else takes. A retry therefore waits for the batch in flight and then sees
every child it cancelled (and re-runs them); each batch, once it holds the lock, re-checks —
in a statement of its own, so in a snapshot taken after the lock — that failFast still holds
(the fan-out failFast and exceeded, merge_rule.py) and stops sweeping once a retry has brought
the fan-out back under its tolerance. (A fan-out still exceeded after a retry is still decided:
the merge the retry re-opened would decide and sweep the same.) The lock comes before every
row lock and a transaction takes only one, so it adds no cycle to the lock order: whoever
waits for it holds nothing yet. It cannot be a row lock: a batch locks children's rows, which
the lock order puts before the fan-out row and the parent's steps.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction

from executions.core import state
from executions.core.merge_rule import FANOUT_EXCEEDED
from executions.models import CancelCause
from executions.platform import transient

SWEEP_BATCH = 5000

# The unfinished executions under ``root`` at any depth (of one spawner of it, if given).
OPEN_DESCENDANTS = """
    WITH RECURSIVE d AS (
        SELECT id, status FROM executions_execution
        WHERE parent_id = %(root)s AND (%(spawner)s::varchar IS NULL OR spawn_vertex = %(spawner)s)
        UNION ALL
        SELECT e.id, e.status FROM executions_execution e JOIN d ON e.parent_id = d.id
    )
    SELECT id FROM d WHERE status IN ('PENDING', 'RUNNING')
    ORDER BY id
    LIMIT %(limit)s
"""


# Whether any of these executions has a step left to run.
OPEN_STEPS_LEFT = """
    SELECT EXISTS (SELECT 1 FROM executions_step
                   WHERE execution_id = ANY(%(executions)s) AND status IN ('READY', 'RUNNING', 'WAITING'))
"""


def cancel_steps(cursor: Any, execution_ids: list[Any], *, message: str) -> None:
    """Cancel every unfinished step of these executions (before them: a step before its
    execution). One statement is not enough: a drain's commit that it waits for (holding a
    step's lock) may create the execution's next step, which the statement's snapshot does not
    hold. So it cancels again, each time in a fresh snapshot, until none is open: then no step
    of theirs runs, so no commit can create one (a commit needs a running step it holds the
    lease of) and no claim can take one."""
    state.cancel_open_steps(cursor, execution_ids, message=message)
    while execution_ids:
        cursor.execute(OPEN_STEPS_LEFT, {"executions": execution_ids})
        if not cursor.fetchone()[0]:
            return
        state.cancel_open_steps(cursor, execution_ids, message=message)


# The failFast lock of a parent (pg_locks.classid; the drains' classes: kick.py, worker/roles.py).
FAIL_FAST_LOCK_CLASS = 7_318_003
LOCK_FAIL_FAST = "SELECT pg_advisory_xact_lock(%(class)s, hashtext(%(parent)s::text))"

# Whether failFast still holds for the fan-out of ``spawner`` in ``root`` (merge_rule.py).
FAIL_FAST_HOLDS = f"""
    SELECT f.fail_fast AND {FANOUT_EXCEEDED} FROM executions_fanout f
    JOIN executions_step s ON s.id = f.step_id
    WHERE s.execution_id = %(root)s AND s.vertex = %(spawner)s
"""  # noqa: S608 - a constant SQL fragment only


def lock_fail_fast(cursor: Any, parent: uuid.UUID) -> None:
    """Take ``parent``'s failFast lock until the end of the caller's transaction: first, before
    any row lock (see above). Each failFast sweep batch of ``parent``'s fan-outs and each retry
    of its failed children (fanout/recovery.py) takes it."""
    cursor.execute(LOCK_FAIL_FAST, {"class": FAIL_FAST_LOCK_CLASS, "parent": str(parent)})


def cancel_descendants(root: uuid.UUID, *, message: str, spawner: str | None = None,
                       cause: str = CancelCause.OPERATOR) -> int:
    """Cancel every unfinished execution under ``root`` (children of ``spawner`` only, if
    given, and everything under them); returns how many were cancelled. Each records
    ``cause``: the failFast policy's cancels are re-run by a retry of the failed children
    (S28), an operator's and a quorum's (``the merge reached minSuccessful``, recorded as
    their error too) are not. A failFast sweep (of one spawner's children) takes the
    parent's failFast lock in each batch and ends early once failFast no longer holds."""
    if cause == CancelCause.FAIL_FAST and spawner is None:
        raise ValueError("a failFast sweep is of one spawner's children")
    cancelled = 0
    while True:
        found, moved = transient.retrying(lambda: _sweep(root, message, spawner, cause))
        cancelled += moved
        if not found:
            return cancelled


def _sweep(root: uuid.UUID, message: str, spawner: str | None, cause: str) -> tuple[int, int]:
    with transaction.atomic(), connection.cursor() as cursor:
        if cause == CancelCause.FAIL_FAST:
            lock_fail_fast(cursor, root)
            cursor.execute(FAIL_FAST_HOLDS, {"root": root, "spawner": spawner})
            holds = cursor.fetchone()
            if not (holds and holds[0]):
                return 0, 0  # a retry re-ran the children: the decision this sweep acts on is gone
        cursor.execute(OPEN_DESCENDANTS, {"root": root, "spawner": spawner, "limit": SWEEP_BATCH})
        ids = [row[0] for row in cursor.fetchall()]
        cancel_steps(cursor, ids, message=f"{message} (cascade)")
        # A quorum's children say why they stopped (the merge succeeded without them).
        return len(ids), state.cancel_executions(cursor, ids, message=f"{message} (cascade from {root})",
                                                 cause=cause, reason=message if cause == CancelCause.QUORUM else None)


# --- a bulk cancel's batch (services/bulk.py) ---------------------------------------------------

# The unfinished executions under some executions, at any depth.
OPEN_UNDER = """
    WITH RECURSIVE d AS (
        SELECT id, status FROM executions_execution WHERE parent_id = ANY(%(roots)s::uuid[])
        UNION ALL
        SELECT e.id, e.status FROM executions_execution e JOIN d ON e.parent_id = d.id
    )
    SELECT id FROM d WHERE status IN ('PENDING', 'RUNNING')
    ORDER BY id
    LIMIT %(limit)s
"""


def seal(cursor: Any, execution_ids: list[Any], *, message: str) -> set[uuid.UUID]:
    """Phase 1 of a cancel for several executions, inside the caller's transaction: their
    unfinished steps, then the unfinished ones of them → CANCELLED (an operator's cancel);
    returns the ids it cancelled. Their descendants are swept afterwards (``sweep_under``)."""
    cancel_steps(cursor, execution_ids, message=message)
    return state.cancelled_executions(cursor, execution_ids, message=message)


def sweep_under(roots: list[Any], *, message: str) -> int:
    """Phase 2 for executions ``seal`` cancelled: cancel everything unfinished under them, in
    bounded transactions (as ``cancel_descendants``), until a pass finds none."""
    cancelled = 0
    while roots:
        found, moved = transient.retrying(lambda: _sweep_under(roots, message))
        cancelled += moved
        if not found:
            break
    return cancelled


def _sweep_under(roots: list[Any], message: str) -> tuple[int, int]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(OPEN_UNDER, {"roots": roots, "limit": SWEEP_BATCH})
        ids = [row[0] for row in cursor.fetchall()]
        cancel_steps(cursor, ids, message=f"{message} (cascade)")
        return len(ids), state.cancel_executions(cursor, ids, message=f"{message} (cascade)")
