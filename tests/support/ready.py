"""Ready work filled in SQL — the shape a fan-out leaves — for the fair-claim tests (issue 30)."""

from __future__ import annotations

from typing import Any

from django.db import connection

from tests.support import helpers

# ``n`` READY steps due ``age`` seconds ago, one per execution, spread over ``roots`` new root
# executions of ``workspace`` (each step's execution is a child of one of them).
FILL = """
    WITH r AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, depth,
                                          request_hash, created_by, created_at, priority, root_id)
        SELECT id, %(workspace)s, %(definition)s, %(version)s, 1, '', 0, '', '', now(), %(priority)s, id
        FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, %(roots)s)) g
        RETURNING id
    ), rs AS (SELECT id, row_number() OVER () - 1 AS k FROM r),
    c AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, depth,
                                          request_hash, created_by, created_at, priority, root_id, parent_id)
        SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s, 1, '', 1, '', '', now(), %(priority)s,
               rs.id, rs.id
        FROM generate_series(0, %(n)s - 1) i JOIN rs ON rs.k = i %% %(roots)s
        RETURNING id, root_id
    )
    INSERT INTO executions_step (execution_id, vertex, attempt, max_attempts, due_at, wait_reason, state, error,
                                 lease_expiries, created_at, workspace_id, root_id, priority, depth)
    SELECT c.id, 't', 1, 1, now() - make_interval(secs => %(age)s), '', '{}', '', 0, now(), %(workspace)s,
           c.root_id, %(priority)s, 1
    FROM c
    RETURNING root_id
"""


def version_of(workspace: Any) -> Any:
    return helpers.publish(workspace, "one", {
        "start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}})


def fill(workspace: Any, n: int, *, roots: int = 1, priority: int = 3, age: float = 0.0) -> set[Any]:
    """``n`` ready steps over ``roots`` new roots; returns the roots' ids."""
    version = version_of(workspace)
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"workspace": workspace.id, "definition": version.definition_id, "version": version.id,
                              "n": n, "roots": roots, "priority": priority, "age": age})
        return {row[0] for row in cursor.fetchall()}
