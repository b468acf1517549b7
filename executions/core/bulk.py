"""The bulk operations' tables (issue 31 §5): an operation, its outcome ledger, its lease.

The one writer of ``executions_bulkoperation`` and ``executions_bulkitem``. What an operation
does to a batch of children is decided in ``services/bulk.py`` (it calls the retry of
``fanout/recovery.py`` and the cancel of ``core/cancel.py``); this module only records it.

* ``create`` inserts the operation and fills its ledger with one ``INSERT … SELECT`` over the
  parent's children that match the filter (``filter_sql``): 100,000 children never pass
  through Python. Each row gets its position: the child's rank in (spawner, item index) order.
* A worker ``claim``s an operation whose lease is free or expired (a killed worker's, after
  ``LEASE_SECONDS``), and runs it in batches. Each batch's transaction locks the operation
  row (``lock``: after the parent's failFast lock, before any engine row — only bulk
  transactions take it, so it adds no cycle), reads the next ``pending`` rows, acts on their
  children, and records each outcome (``record``: guarded on the row's current outcome) with
  the counters, in the same transaction as the action. Batches of one operation are serial
  (the row lock), and a batch commits with its ledger rows or not at all: each child is acted
  on once, however often a worker dies.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from executions.models import BulkOutcome

# One SQL condition on a child ``c`` per filter term; a filter ANDs the terms it gives.
TERMS: dict[str, str] = {
    "status": "c.status = ANY(%(status)s::varchar[])",
    "error_contains": "strpos(lower(c.error), lower(%(error_contains)s)) > 0",
    "indexes": "c.item_index = ANY(%(indexes)s::int[])",
    "item_keys": "c.item_key = ANY(%(item_keys)s::varchar[])",  # index execution_child_item_key
    "error_signature": "c.status = 'FAILED' AND c.error_signature = %(error_signature)s",
    "spawner": "c.spawn_vertex = %(spawner)s",
}


def filter_sql(terms: dict[str, Any]) -> str:
    """The condition of a filter over a parent's children ``c`` (the parent is the parameter
    ``parent``; each term's value the parameter of its name): every term given must hold."""
    unknown = sorted(set(terms) - set(TERMS))
    if unknown:
        raise ValueError(f"unknown filter terms {unknown}")
    conditions = ["c.parent_id = %(parent)s", "c.item_index IS NOT NULL"]
    return " AND ".join(conditions + [TERMS[name] for name in sorted(terms)])


INSERT_OPERATION = """
    INSERT INTO executions_bulkoperation (id, workspace_id, execution_id, action, filter, matched, created_by,
                                          leased_by)
    VALUES (%(id)s, %(workspace)s, %(parent)s, %(action)s, %(filter)s::jsonb, 0, %(actor)s, '')
"""

FILL_LEDGER = """
    INSERT INTO executions_bulkitem (operation_id, position, child)
    SELECT %(id)s, row_number() OVER (ORDER BY c.spawn_vertex, c.item_index), c.id
    FROM executions_execution c
    WHERE {where}
"""

SET_MATCHED = """
    UPDATE executions_bulkoperation
    SET matched = %(matched)s,
        state = CASE WHEN %(matched)s = 0 THEN 'succeeded' ELSE state END,
        finished_at = CASE WHEN %(matched)s = 0 THEN now() END
    WHERE id = %(id)s
"""


def create(cursor: Any, *, workspace: int, parent: uuid.UUID, action: str, terms: dict[str, Any],
           actor: str) -> tuple[uuid.UUID, int]:
    """Insert an operation and its ledger (every matching child, pending); returns its id and
    how many children it matched (none: it is finished at once)."""
    operation = uuid.uuid4()
    cursor.execute(INSERT_OPERATION, {"id": operation, "workspace": workspace, "parent": parent, "action": action,
                                      "filter": json.dumps(terms), "actor": actor})
    cursor.execute(FILL_LEDGER.format(where=filter_sql(terms)), {"id": operation, "parent": parent, **terms})
    matched = cursor.rowcount
    cursor.execute(SET_MATCHED, {"id": operation, "matched": matched})
    return operation, matched


# An operation that is running and not leased (or whose worker's lease expired), oldest first.
# SKIP LOCKED: a worker looking for work passes over an operation another is claiming.
CLAIM = """
    UPDATE executions_bulkoperation o
    SET leased_by = %(worker)s, lease_expires_at = now() + make_interval(secs => %(lease)s)
    WHERE o.id = (SELECT id FROM executions_bulkoperation
                  WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now())
                    AND (%(only)s::uuid IS NULL OR id = %(only)s::uuid)
                  ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING o.id, o.execution_id, o.action, o.created_by
"""

ORPHANED = """
    SELECT EXISTS (SELECT 1 FROM executions_bulkoperation
                   WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now()))
"""


@dataclass(frozen=True)
class Claimed:
    id: uuid.UUID
    parent: uuid.UUID
    action: str
    actor: str


def claim(cursor: Any, *, worker: str, lease_seconds: float, only: uuid.UUID | None = None) -> Claimed | None:
    """Lease the oldest runnable operation (or ``only``) to ``worker``; None if there is none."""
    cursor.execute(CLAIM, {"worker": worker, "lease": lease_seconds, "only": only})
    row = cursor.fetchone()
    return Claimed(*row) if row else None


def orphaned(cursor: Any) -> bool:
    """Whether an operation is running with no live worker (none leased, or its lease expired)."""
    cursor.execute(ORPHANED)
    return bool(cursor.fetchone()[0])


LOCK = """
    SELECT state FROM executions_bulkoperation WHERE id = %(id)s AND leased_by = %(worker)s FOR UPDATE
"""


def lock(cursor: Any, operation: uuid.UUID, worker: str) -> bool:
    """Lock the operation's row for a batch; False if it is no longer ``worker``'s or finished
    (another worker took it over after this one's lease expired)."""
    cursor.execute(LOCK, {"id": operation, "worker": worker})
    row = cursor.fetchone()
    return bool(row) and row[0] == "running"


NEXT = """
    SELECT position, child FROM executions_bulkitem
    WHERE operation_id = %(id)s AND outcome = %(outcome)s
    ORDER BY position LIMIT %(limit)s
"""


def next_batch(cursor: Any, operation: uuid.UUID, limit: int, outcome: str = BulkOutcome.PENDING
               ) -> list[tuple[int, uuid.UUID]]:
    """The next ``limit`` ledger rows with ``outcome`` (position, child), in position order."""
    cursor.execute(NEXT, {"id": operation, "outcome": outcome, "limit": limit})
    return [(position, child) for position, child in cursor.fetchall()]


# Guarded on the row's outcome: a row moves once (pending → sealed/done/skipped, sealed → done).
RECORD = """
    WITH moved AS (
        UPDATE executions_bulkitem b SET outcome = r.outcome, reason = r.reason
        FROM unnest(%(positions)s::int[], %(outcomes)s::varchar[], %(reasons)s::varchar[])
             AS r(position, outcome, reason)
        WHERE b.operation_id = %(id)s AND b.position = r.position AND b.outcome = %(from)s
        RETURNING b.outcome
    )
    UPDATE executions_bulkoperation
    SET done = done + (SELECT count(*) FROM moved WHERE outcome = 'done'),
        skipped = skipped + (SELECT count(*) FROM moved WHERE outcome = 'skipped'),
        lease_expires_at = now() + make_interval(secs => %(lease)s)
    WHERE id = %(id)s
"""


def record(cursor: Any, operation: uuid.UUID, outcomes: Sequence[tuple[int, str, str]], *, lease_seconds: float,
           from_: str = BulkOutcome.PENDING) -> None:
    """Record (position, outcome, reason) of rows now in ``from_``, move the counters and renew
    the lease, inside the transaction that acted on those children."""
    cursor.execute(RECORD, {"id": operation, "positions": [o[0] for o in outcomes],
                            "outcomes": [o[1] for o in outcomes], "reasons": [o[2][:200] for o in outcomes],
                            "from": from_, "lease": lease_seconds})


FINISH = """
    UPDATE executions_bulkoperation SET state = 'succeeded', finished_at = now(), lease_expires_at = NULL
    WHERE id = %(id)s AND state = 'running'
      AND NOT EXISTS (SELECT 1 FROM executions_bulkitem
                      WHERE operation_id = %(id)s AND outcome IN ('pending', 'sealed'))
"""


def finish_if_done(cursor: Any, operation: uuid.UUID) -> bool:
    """Mark the operation finished if no ledger row is left to act on; True if it is now."""
    cursor.execute(FINISH, {"id": operation})
    return cursor.rowcount == 1


RELEASE = """
    UPDATE executions_bulkoperation SET lease_expires_at = NULL
    WHERE id = %(id)s AND leased_by = %(worker)s AND state = 'running'
"""


def release(cursor: Any, operation: uuid.UUID, worker: str) -> None:
    """Give the lease back (a worker that stops between batches): the next worker takes it at once."""
    cursor.execute(RELEASE, {"id": operation, "worker": worker})


# --- why a child was not acted on ---------------------------------------------------------------

PURGED = "purged"
NOT_RETRIED = "not failed any more"

# The batch's children as a retry sees them, with whether their tree's payloads are gone (S19).
RETRY_VIEW = """
    SELECT b.child, c.status, c.cancel_cause,
           EXISTS (SELECT 1 FROM executions_step s WHERE s.execution_id = c.id AND s.status = 'FAILED'),
           EXISTS (SELECT 1 FROM executions_step s WHERE s.execution_id = c.id),
           r.payloads_purged_at IS NOT NULL OR c.payloads_purged_at IS NOT NULL
    FROM unnest(%(children)s::uuid[]) AS b(child)
    LEFT JOIN executions_execution c ON c.id = b.child AND c.parent_id = %(parent)s
    LEFT JOIN executions_execution r ON r.id = c.root_id
"""


def why_not_retried(cursor: Any, parent: uuid.UUID, children: list[uuid.UUID]) -> dict[uuid.UUID, str | None]:
    """Per child, why a retry would not re-run it (``None``: it may — the retry decides)."""
    cursor.execute(RETRY_VIEW, {"parent": parent, "children": children})
    return {child: _retry_reason(status, cause, failed_step, any_step, purged)
            for child, status, cause, failed_step, any_step, purged in cursor.fetchall()}


def _retry_reason(status: str | None, cause: str, failed_step: bool, any_step: bool, purged: bool) -> str | None:
    if status is None or purged:
        return PURGED
    if status == "FAILED":
        return None if failed_step else "failed on a FAIL vertex" if any_step else "a bad item: it never ran"
    if status == "CANCELLED":
        return None if cause == "failFast" else "cancelled by an operator"
    return f"{NOT_RETRIED} ({status})"


CANCEL_VIEW = """
    SELECT b.child, c.status FROM unnest(%(children)s::uuid[]) AS b(child)
    JOIN executions_execution c ON c.id = b.child
"""


def why_not_cancelled(cursor: Any, children: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Per child that a cancel's seal did not move, why (absent: purged)."""
    if not children:
        return {}
    cursor.execute(CANCEL_VIEW, {"children": children})
    return {child: f"already {status}" for child, status in cursor.fetchall()}
