"""Cancelling trees (S18): after a cancel returns, nothing under it is left to run.

A cancel works in two phases, each in its own transactions, so it never holds a lock that
a child's completion or a spawn batch needs while it waits for one of theirs:

1. **Seal** the target: its unfinished steps, then it, → CANCELLED (services.py). Its
   SPAWNER step is among them, so a spawn batch in flight either commits before the seal
   takes the step's lock, or finds its lease gone at its next batch (leases.fence): from
   then on the spawner creates nothing.
2. **Sweep** the descendants (``cancel_descendants``): read the unfinished ones at any depth
   — in a fresh snapshot, so children a spawn batch committed during phase 1 are seen — and
   cancel their steps, then them, in bounded batches, until a pass finds none. Cancelling a
   child seals its own spawners the same way, so the sweep ends.

Each transaction follows the lock order of state.py (a child's rows before its parent's
fan-out row and steps), and is retried when PostgreSQL picks it as a deadlock victim.
"""

from __future__ import annotations

import uuid

from django.db import connection, transaction

from executions.core import state
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


def cancel_descendants(root: uuid.UUID, *, message: str, spawner: str | None = None,
                       cause: str = CancelCause.OPERATOR) -> int:
    """Cancel every unfinished execution under ``root`` (children of ``spawner`` only, if
    given, and everything under them); returns how many were cancelled. Each records
    ``cause``: the failFast policy's cancels are re-run by a retry of the failed children
    (S28), an operator's are not."""
    cancelled = 0
    while True:
        found, moved = transient.retrying(lambda: _sweep(root, message, spawner, cause))
        cancelled += moved
        if not found:
            return cancelled


def _sweep(root: uuid.UUID, message: str, spawner: str | None, cause: str) -> tuple[int, int]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(OPEN_DESCENDANTS, {"root": root, "spawner": spawner, "limit": SWEEP_BATCH})
        ids = [row[0] for row in cursor.fetchall()]
        state.cancel_open_steps(cursor, ids, message=f"{message} (cascade)")
        return len(ids), state.cancel_executions(cursor, ids, message=f"{message} (cascade from {root})",
                                                 cause=cause)
