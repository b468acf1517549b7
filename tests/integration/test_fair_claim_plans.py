"""Issue 30 §5: the fair claim stays index-driven with 1,000,000 ready steps in one workspace
and thousands of other workspaces with work ready: every read of the step table is a scan of
step_claim_fair. The million is filled in one INSERT from generate_series — one root, a
thousand children of a thousand steps each (the index keys on workspace, priority, root and
due time: how the rows are spread over executions does not change the plans) — so the
fixture costs one bulk insert, not a million executions (BACKLOG: the million with analysed
statistics, fewer with stale ones). No planner setting is made: the plans come from the
statements' shape."""

from __future__ import annotations

import pytest
from django.db import connection

from executions.core import fairness  # the statements, planned as a claim plans them
from tests.support.plans import plan, scans
from tests.support.ready import version_of

# The million with analysed statistics; with stale ones (the statistics say the table is
# nearly empty, the harder case for the planner) a tenth: the fill and its rollback cost about a
# minute per million on the shared 2-core machine, and the plans are the same.
BACKLOG = {"analysed": 1_000_000, "stale": 100_000, "emptied": 200_000}
CHILDREN = 1_000  # executions under the one root, BACKLOG // CHILDREN steps each
WORKSPACES = 2_000

# Workspaces on the default's plan, each with one root and one ready step.
MANY = """
    WITH w AS (
        INSERT INTO workflows_workspace (slug, name, plan_id, created_at)
        SELECT 'tenant-' || i, 'tenant-' || i, %(plan)s, now() FROM generate_series(1, %(n)s) i RETURNING id
    ), e AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, depth,
                                          request_hash, created_by, created_at, root_id)
        SELECT x.id, x.ws, %(definition)s, %(version)s, 1, '', 0, '', '', now(), x.id
        FROM (SELECT gen_random_uuid() AS id, w.id AS ws FROM w) x
        RETURNING id, workspace_id
    )
    INSERT INTO executions_step (execution_id, vertex, attempt, max_attempts, due_at, wait_reason, state, error,
                                 lease_expiries, created_at, workspace_id, root_id)
    SELECT e.id, 't', 1, 1, now(), '', '{}', '', 0, now(), e.workspace_id, e.id FROM e
"""


# The backlog: one root of ``workspace``, CHILDREN children, BACKLOG ready steps over them.
BACKLOG_FILL = """
    WITH r AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, depth,
                                          request_hash, created_by, created_at, root_id)
        SELECT g.id, %(workspace)s, %(definition)s, %(version)s, 1, '', 0, '', '', now(), g.id
        FROM (SELECT gen_random_uuid() AS id) g RETURNING id
    ), c AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, attempt, error, depth,
                                          request_hash, created_by, created_at, root_id, parent_id)
        SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s, 1, '', 1, '', '', now(), r.id, r.id
        FROM r, generate_series(1, %(children)s) RETURNING id, root_id
    ), i AS (
        INSERT INTO executions_step (execution_id, vertex, attempt, max_attempts, due_at, wait_reason, state, error,
                                     lease_expiries, created_at, workspace_id, root_id, depth)
        SELECT c.id, 't' || k, 1, 1, now() - interval '1 second', '', '{}', '', 0, now(), %(workspace)s, c.root_id, 1
        FROM c, generate_series(1, %(each)s) k
    )
    SELECT id FROM r
"""


@pytest.fixture(params=["analysed", "stale", "emptied"])
def crowded(request, workspace):
    """``stale``: the step table's statistics predate the fill (while a sudden million rows wait
    for autovacuum); ``emptied``: they were taken on the empty table (as after a TRUNCATE): the
    plans must not depend on them."""
    version = version_of(workspace)
    with connection.cursor() as cursor:
        if request.param == "emptied":
            cursor.execute("ANALYZE executions_step")
        cursor.execute(BACKLOG_FILL, {"workspace": workspace.id, "definition": version.definition_id,
                                      "version": version.id, "children": CHILDREN,
                                      "each": BACKLOG[request.param] // CHILDREN})
        [root] = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM executions_step WHERE workspace_id = %s AND status = 'READY'",
                       [workspace.id])
        assert cursor.fetchone()[0] == BACKLOG[request.param]
        cursor.execute(MANY, {"plan": workspace.plan_id, "n": WORKSPACES, "definition": version.definition_id,
                              "version": version.id})
        # Analysed, and every table the rows' foreign keys point at (see test_scale_plans).
        steps = "executions_step, " if request.param == "analysed" else ""
        cursor.execute(f"ANALYZE {steps}executions_execution, workflows_workspace, workflows_plan, "
                       "workflows_workflowdefinition, workflows_workflowversion")
    return workspace, root


@pytest.mark.timeout(900)
def test_the_fair_claims_statements_read_steps_only_through_step_claim_fair(crowded):
    """As a claim plans them — no planner setting: the statements' shape alone."""
    workspace, root = crowded
    statements = {
        "DUE_FLOWS": (fairness.DUE_FLOWS, {"top": 2**63 - 1, "top_root": fairness.TOP, "k": 100, "room": 100,
                                           "nil": fairness.NIL, "priorities": [1, 2, 3, 4, 5]}),
        "TAKE": (fairness.TAKE, {"ws": [workspace.id], "priorities": [3], "roots": [root], "ns": [100]}),
        "BEYOND": (fairness.BEYOND, {"ws": [workspace.id], "ns": [100], "taken": [1, 2, 3]}),
    }
    for name, (sql, params) in statements.items():
        nodes = [s for s in scans(plan(sql, params)) if s[1] == "executions_step"]
        assert nodes, name
        assert {kind for kind, _, _ in nodes} <= {"Index Scan", "Index Only Scan"}, (name, nodes)
        assert {index for _, _, index in nodes} == {"step_claim_fair"}, (name, nodes)
