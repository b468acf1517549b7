"""The one INSERT of each engine table: executions and steps (payloads: payloads.put_many).

Every new row of these tables is written here, so column defaults live in one place. Rows
are inserted without a status: the database default gives the first one (PENDING, READY);
status changes belong to state.py. Both inserts are set-based (arrays, one statement) and
idempotent: a row that exists already — a repeated idempotency key, a child's per-item key
(S2), a step of a redelivered result — is left alone and not returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from executions.platform import notify

# ON CONFLICT without a target: any unique key — the primary key, the idempotency key
# (workspace, key) and the per-item key (parent, spawn vertex, item index) — makes a row a no-op.
# The priority is the one given, else the parent's (a child: the tree shares its root's), else that
# of the execution whose CHAIN starts it, else the default.
INSERT_EXECUTIONS = """
    INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, idempotency_key,
        request_hash, parent_id, root_id, spawned_by_id, spawn_vertex, item_index, depth, chained_from_id,
        created_by, item_key, tags, created_at, priority)
    SELECT n.id, n.workspace_id, n.workflow_id, n.version_id, 1, '', n.idempotency_key, n.request_hash,
           n.parent_id, coalesce(n.root_id, n.id), n.spawned_by_id, n.spawn_vertex, n.item_index, n.depth,
           n.chained_from_id, n.created_by, n.item_key, n.tags::jsonb, now(),
           coalesce(n.priority, p.priority, c.priority, %(default_priority)s)
    FROM unnest(%(ids)s::uuid[], %(workspaces)s::bigint[], %(workflows)s::bigint[], %(versions)s::bigint[],
                %(keys)s::varchar[], %(hashes)s::varchar[], %(parents)s::uuid[], %(roots)s::uuid[],
                %(spawned_by)s::bigint[], %(spawn_vertices)s::varchar[], %(indexes)s::int[], %(depths)s::int[],
                %(chained_from)s::uuid[], %(created_by)s::varchar[], %(item_keys)s::varchar[], %(tags)s::text[],
                %(priorities)s::smallint[])
         AS n(id, workspace_id, workflow_id, version_id, idempotency_key, request_hash, parent_id, root_id,
              spawned_by_id, spawn_vertex, item_index, depth, chained_from_id, created_by, item_key, tags, priority)
    LEFT JOIN executions_execution p ON p.id = n.parent_id
    LEFT JOIN executions_execution c ON c.id = n.chained_from_id
    ORDER BY n.item_index
    ON CONFLICT DO NOTHING
    RETURNING id, item_index
"""

# A held step (the first step of a child beyond its fan-out's maxConcurrency) is READY but due
# at this far-off time, so no claim takes it until release_held_steps makes it due now. A
# real timestamp, not 'infinity': Python's datetime (the ORM, the UI) cannot represent that.
HELD_UNTIL = "9999-12-31T00:00:00+00:00"
# A step WAITING for a signal (a merge for its children) has no due time: this one, after every
# wait's deadline (a WAITING step's due time is its wait's deadline otherwise: waits.py) and
# distinct from HELD_UNTIL (a re-run must not take it for a held step).
NO_DUE_TIME = "9999-12-30T00:00:00+00:00"
HELD_REASON = "waiting for a slot: its fan-out runs at most maxConcurrency children at once"

# A step's destination is resolved by name in its execution's workspace (NULL: none); its root
# and priority are its execution's, and so is its workspace if it is a plain step (the fair
# claim's key and index, fairness.py; a destination step is claimed per destination).
INSERT_STEPS = """
    INSERT INTO executions_step (execution_id, vertex, prev_vertex, attempt, max_attempts, due_at, wait_reason,
                                 destination_id, lease_expiries, state, error, created_at, workspace_id, root_id,
                                 priority, depth)
    SELECT n.execution_id, n.vertex, n.prev_vertex, 1, n.max_attempts,
           CASE WHEN n.held THEN %(held_until)s::timestamptz ELSE now() END,
           CASE WHEN n.held THEN %(held_reason)s ELSE '' END, d.id, 0, '{}'::jsonb, '', now(),
           CASE WHEN d.id IS NULL THEN e.workspace_id END, e.root_id, e.priority, e.depth
    FROM unnest(%(executions)s::uuid[], %(vertices)s::varchar[], %(prevs)s::varchar[], %(max_attempts)s::int[],
                %(workspaces)s::bigint[], %(destinations)s::varchar[], %(held)s::boolean[])
         AS n(execution_id, vertex, prev_vertex, max_attempts, workspace_id, destination, held)
    JOIN executions_execution e ON e.id = n.execution_id
    LEFT JOIN executions_destination d ON d.workspace_id = n.workspace_id AND d.name = n.destination
    ON CONFLICT (execution_id, vertex) DO NOTHING
"""

# Up to ``n`` held first steps of a fan-out's children, in item order from a cursor (every held
# child's index is at or past it), made due now; per fan-out, how many and the last index. The
# walk follows the per-item key's unique index. SKIP LOCKED: the only other writer of a held
# step is a cancel, which is moving it to CANCELLED right now.
RELEASE_HELD = """
    WITH r AS (
        SELECT unnest(%(parents)s::uuid[]) AS parent_id, unnest(%(vertices)s::varchar[]) AS spawn_vertex,
               unnest(%(cursors)s::int[]) AS lo, unnest(%(limits)s::int[]) AS n
    ),
    held AS (
        SELECT h.id, h.item_index, r.parent_id, r.spawn_vertex FROM r, LATERAL (
            SELECT s.id, e.item_index FROM executions_execution e
            JOIN executions_step s ON s.execution_id = e.id
            WHERE e.parent_id = r.parent_id AND e.spawn_vertex = r.spawn_vertex AND e.item_index >= r.lo
              AND s.status = 'READY' AND s.due_at = %(held_until)s::timestamptz
            ORDER BY e.item_index
            LIMIT r.n
            FOR UPDATE OF s SKIP LOCKED
        ) h
    ),
    moved AS (
        UPDATE executions_step s SET due_at = now(), wait_reason = ''
        FROM held WHERE s.id = held.id
        RETURNING held.parent_id, held.spawn_vertex, held.item_index
    )
    SELECT parent_id, spawn_vertex, count(*), max(item_index) FROM moved GROUP BY parent_id, spawn_vertex
"""


DEFAULT_PRIORITY = 3  # of an execution started without one (1 first, 5 last)
PRIORITIES = range(1, 6)


class NewExecution(NamedTuple):
    """An execution to insert. ``root_id`` None: it is its own root (a top-level start). A
    named tuple, not a frozen dataclass: a spawn builds one per child, and a frozen
    dataclass's ``__init__`` (a ``object.__setattr__`` per field) cost three times as much."""

    workspace_id: int
    workflow_id: int
    version_id: int
    id: uuid.UUID | None = None  # None: generated
    idempotency_key: str | None = None
    request_hash: str = ""
    parent_id: uuid.UUID | None = None
    root_id: uuid.UUID | None = None
    spawned_by_id: int | None = None
    spawn_vertex: str | None = None
    item_index: int | None = None
    depth: int = 0
    chained_from_id: uuid.UUID | None = None
    created_by: str = ""
    item_key: str | None = None  # a child's business key (the SPAWNER's itemKey)
    tags: str | None = None  # JSON text of its tags (a descendant: its parent's or chainer's), None: none
    priority: int | None = None  # None: inherited (see INSERT_EXECUTIONS)


class NewStep(NamedTuple):
    execution_id: uuid.UUID
    workspace_id: int
    vertex: str
    max_attempts: int
    prev_vertex: str | None = None
    destination: str | None = None  # a destination name in the execution's workspace
    held: bool = False  # not claimable until released (a fan-out's maxConcurrency)


def insert_executions(cursor: Any, rows: Sequence[NewExecution]) -> list[tuple[uuid.UUID, int | None]]:
    """Insert executions; returns ``(id, item_index)`` of the rows inserted (not of conflicts)."""
    if not rows:
        return []
    ids = [row.id or uuid.uuid4() for row in rows]
    cursor.execute(INSERT_EXECUTIONS, {
        "ids": ids,
        "workspaces": [row.workspace_id for row in rows],
        "workflows": [row.workflow_id for row in rows],
        "versions": [row.version_id for row in rows],
        "keys": [row.idempotency_key for row in rows],
        "hashes": [row.request_hash for row in rows],
        "parents": [row.parent_id for row in rows],
        "roots": [row.root_id for row in rows],
        "spawned_by": [row.spawned_by_id for row in rows],
        "spawn_vertices": [row.spawn_vertex for row in rows],
        "indexes": [row.item_index for row in rows],
        "depths": [row.depth for row in rows],
        "chained_from": [row.chained_from_id for row in rows],
        "created_by": [row.created_by for row in rows],
        "item_keys": [row.item_key for row in rows],
        "tags": [row.tags for row in rows],
        "priorities": [row.priority for row in rows], "default_priority": DEFAULT_PRIORITY,
    })
    return [(row[0], row[1]) for row in cursor.fetchall()]


def insert_steps(cursor: Any, rows: Sequence[NewStep]) -> int:
    """Insert READY steps, due now (or held: see HELD_UNTIL), and wake a drain if any is
    new; returns how many were inserted."""
    if not rows:
        return 0
    cursor.execute(INSERT_STEPS, {
        "held": [row.held for row in rows], "held_until": HELD_UNTIL, "held_reason": HELD_REASON,
        "executions": [row.execution_id for row in rows],
        "vertices": [row.vertex for row in rows],
        "prevs": [row.prev_vertex for row in rows],
        "max_attempts": [row.max_attempts for row in rows],
        "workspaces": [row.workspace_id for row in rows],
        "destinations": [row.destination for row in rows],
    })
    inserted: int = cursor.rowcount
    if inserted:
        notify.work_created(cursor)
    return inserted


def release_held_steps(cursor: Any, wanted: Sequence[tuple[uuid.UUID, str, int, int]]
                       ) -> dict[tuple[uuid.UUID, str], tuple[int, int]]:
    """Release held first steps: ``(parent execution, spawner vertex, cursor, n)`` makes up to
    ``n`` of that fan-out's held children due now, in item order from ``cursor``. Returns, per
    (parent, vertex) that released any, (how many, the last item index); wakes a drain if any."""
    if not wanted:
        return {}
    cursor.execute(RELEASE_HELD, {
        "parents": [w[0] for w in wanted], "vertices": [w[1] for w in wanted],
        "cursors": [w[2] for w in wanted], "limits": [w[3] for w in wanted], "held_until": HELD_UNTIL,
    })
    released = {(row[0], row[1]): (int(row[2]), int(row[3])) for row in cursor.fetchall()}
    if released:
        notify.work_created(cursor)
    return released
