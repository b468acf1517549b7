"""Issue 31 §4: the searches by item key and by tag are index-driven however many children a
parent has. A fan-out of 60,000 children (each with an item key and the tags it inherited),
analysed, must be searched through ``execution_child_item_key`` and ``execution_tags`` (or, for
a tag most rows have, the newest-first index), never by reading the execution table.
``bench ui`` prints the server times of the same lookups at any size."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from executions.selectors import children, executions
from tests.support import helpers
from tests.support.plans import indexes, scans

pytestmark = pytest.mark.django_db

N = 60_000
TAGS = '{"customer": "acme", "region": "eu"}'

CHILDREN = """
    INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error, depth,
        request_hash, created_by, parent_id, root_id, spawn_vertex, item_index, item_key, tags, created_at)
    SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s,
           CASE WHEN i %% 50 = 3 THEN 'FAILED' ELSE 'SUCCEEDED' END, 1,
           CASE WHEN i %% 50 = 3 THEN 'HTTP 503 ledger unavailable' ELSE '' END, 1, '', '',
           %(parent)s, %(parent)s, 'fan', i, 'e-' || i, %(tags)s::jsonb, now() - interval '1 hour'
    FROM generate_series(0, %(n)s - 1) AS i
"""

# Some other executions: untagged roots, and a few with a rare tag.
ROOTS = """
    INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error, depth,
        request_hash, created_by, tags, created_at)
    SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s, 'SUCCEEDED', 1, '', 0, '', '',
           CASE WHEN i %% 1000 = 0 THEN '{"customer": "zeta"}'::jsonb END, now() - i * interval '1 second'
    FROM generate_series(0, %(n)s - 1) AS i
"""


@pytest.fixture
def fan(workspace):
    version = helpers.publish(workspace, "one", helpers.NOOP)
    parent = helpers.start(workspace, "one", {}, tags={"customer": "acme", "region": "eu"})
    params = {"workspace": workspace.id, "definition": version.definition_id, "version": version.id,
              "parent": parent.pk, "n": N, "tags": TAGS}
    with connection.cursor() as cursor:
        cursor.execute(CHILDREN, params)
        cursor.execute(ROOTS, {**params, "n": N // 2})
        cursor.execute("ANALYZE executions_execution, workflows_workspace, workflows_workflowdefinition, "
                       "workflows_workflowversion")
    return parent


def plan_of(rows) -> dict:
    return json.loads(rows.explain(format="json"))


def execution_scans(found) -> list[tuple[str, str | None, str | None]]:
    return [s for s in scans(found) if s[1] == "executions_execution"]


def test_children_by_item_key_read_the_item_key_index(fan):
    for keys in [("e-48213",), ("e-7", "e-48213", "e-59999")]:
        rows = children.page_rows(fan.pk, children.Filter(item_keys=keys), after=None, limit=100)
        nodes = execution_scans(plan_of(rows))
        assert [index for _, _, index in nodes] == ["execution_child_item_key"], nodes
        assert sorted(row.item_key for row in rows) == sorted(keys)
    failed = children.page_rows(fan.pk, children.Filter(item_keys=("e-3", "e-4"), status="FAILED"), after=None,
                                limit=100)
    assert [row.item_key for row in failed] == ["e-3"]


def rare_and_dense(workspace):
    rare = executions.page_rows(workspace, status=None, workflow=None, parent=None, top_level=None, after=None,
                                limit=100, tags=[{"customer": "zeta"}])
    dense = executions.page_rows(workspace, status=None, workflow=None, parent=None, top_level=None, after=None,
                                 limit=100, tags=[{"customer": "acme", "region": "eu"}])
    return rare, dense


def test_a_rare_tag_reads_the_tags_index_and_a_common_one_the_newest_first_index(workspace, fan):
    rare, dense = rare_and_dense(workspace)
    rare_plan = plan_of(rare)
    assert "execution_tags" in indexes(rare_plan), rare_plan
    assert len(list(rare)) == N // 2 // 1000
    dense_plan = plan_of(dense)
    dense_nodes = execution_scans(dense_plan)
    assert all(kind != "Seq Scan" for kind, _, _ in dense_nodes), dense_nodes
    # Most rows have it: walking newest first stops after a page, where the tags index would
    # hand every match to a sort.
    # (The list joins each row's workflow and version: their primary keys may be read too.)
    assert {name for name in indexes(dense_plan) if name.startswith("execution")} == {"execution_ws_created"}, \
        dense_plan
    assert len(list(dense)) == 101
    top = executions.page_rows(workspace, status=None, workflow=None, parent=None, top_level=True, after=None,
                               limit=100, tags=[{"customer": "acme"}])
    assert [row.pk for row in top] == [fan.pk]
    assert all(kind != "Seq Scan" for kind, _, _ in execution_scans(plan_of(top)))
