"""``bench floor``: the raw database cost of writing the rows a fan-out needs — N child
execution rows and N step rows, bulk-inserted in one transaction — the floor under any
engine built on these tables."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction

from bench.common import reset
from executions.services import lifecycle as services
from workflows.models import Workspace

FLOOR = """
    WITH ins AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, request_hash,
            parent_id, root_id, spawn_vertex, item_index, depth, created_by, created_at)
        SELECT gen_random_uuid(), %(workspace)s, %(workflow)s, %(version)s, 1, '', '', %(parent)s, %(parent)s,
               'fanout', g.i, 1, '', now()
        FROM generate_series(0, %(n)s - 1) AS g(i)
        RETURNING id
    )
    INSERT INTO executions_step (execution_id, vertex, attempt, max_attempts, due_at, wait_reason, lease_expiries,
                                 state, error, created_at)
    SELECT id, 'work', 1, 3, now(), '', 0, '{}'::jsonb, '', now() FROM ins
"""


def run(items: int) -> dict[str, Any]:
    reset()
    from bench.fanout import publish

    workspace = Workspace.objects.get(slug="default")
    publish(workspace)
    parent = services.start_execution(workspace, workflow="bench-fanout", input={"items": []},
                                      created_by="bench").execution
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(FLOOR, {"workspace": workspace.pk, "workflow": parent.workflow_id, "version": parent.version_id,
                               "parent": parent.pk, "n": items})
    seconds = time.monotonic() - started
    return {"items": items, "seconds": round(seconds, 3), "rows_per_s": round(2 * items / seconds, 1)}
