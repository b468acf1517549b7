"""Issue 14 §7: the idle-worker and tick queries stay index-driven however many steps have
finished. A table of 60,000 finished steps (analysed, so the planner knows READY and RUNNING
rows are rare) must be answered from the partial claim and lease indexes, never by reading
the step table."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from executions import worker
from executions.core import payloads
from tests.support import helpers
from tests.support.plans import plan, scans

FINISHED = 60_000

FILL = """
    WITH e AS (
        INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error, depth,
                                          request_hash, created_by, created_at, finished_at, output_vertex)
        SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s, 'SUCCEEDED', 1, '', 0, '', '', now(),
               now(), 't'
        FROM generate_series(1, %(n)s)
        RETURNING id
    )
    INSERT INTO executions_step (execution_id, vertex, status, attempt, max_attempts, due_at, wait_reason, state,
                                 error, lease_expiries, created_at, finished_at)
    SELECT e.id, 't', 'SUCCEEDED', 1, 1, now(), '', '{}', '', 0, now(), now() FROM e
"""


@pytest.fixture
def finished_steps(workspace):
    version = helpers.publish(workspace, "one", {
        "start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}})
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"workspace": workspace.id, "definition": version.definition_id,
                              "version": version.id, "n": FINISHED})
        # Analysed, so the planner knows READY and RUNNING steps are rare; and every table the
        # rows' foreign keys point at, so the checks of those keys at teardown are planned
        # afresh: a plan the session cached while a table was small and not yet bloated by the
        # rows earlier tests rolled back would scan that whole table once per row (minutes).
        cursor.execute("ANALYZE executions_step, executions_execution, workflows_workspace, "
                       "workflows_workflowdefinition, workflows_workflowversion")
    helpers.start(workspace, "one", {"x": 1})  # one READY step, so the claim index is not empty


@pytest.mark.parametrize("name", ["NEXT_DUE", "WORK_PENDING"])
def test_idle_queries_use_the_partial_indexes_not_the_step_table(finished_steps, name):
    nodes = [s for s in scans(plan(getattr(worker, name))) if s[1] == "executions_step"]
    assert nodes, "the query reads steps"
    for kind, _, _index in nodes:
        assert kind in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan"), (name, nodes)
    used = {index for _, _, index in nodes if index}
    assert used <= {"step_claim_free", "step_claim_destination", "step_running_lease"}, (name, used)


def test_idle_queries_still_answer_right(finished_steps):
    with connection.cursor() as cursor:
        cursor.execute(worker.WORK_PENDING)
        assert cursor.fetchone()[0] is True
        cursor.execute(worker.NEXT_DUE)
        assert cursor.fetchone()[0] <= 0  # the READY step is due now
        cursor.execute("UPDATE executions_step SET status = 'SUCCEEDED' WHERE status = 'READY'")
        cursor.execute(worker.WORK_PENDING)
        assert cursor.fetchone()[0] is False
        cursor.execute(worker.NEXT_DUE)
        assert cursor.fetchone()[0] is None


# --- the spawner reads the stored list once, not once per batch --------------------------------

def list_reads(queries: list[dict]) -> int:
    """Statements that read into the stored list of items (``data #> path``)."""
    return sum(1 for q in queries if "executions_payload" in q["sql"] and "#>" in q["sql"]
               and "INSERT INTO executions_payload" not in q["sql"])


@pytest.mark.parametrize(("item_input", "per"), [
    (None, 1), ({"id": "$.item.i"}, 1), ({"items": "$.items", "first": "$.firstItem"}, 2)])
def test_spawn_batches_do_not_reread_the_stored_list(workspace, settings, item_input, per):
    """Issue 14 §7: today every batch indexes into the parent's whole stored input, so N/B
    batches each read all N items (O(N²)). The list is read a fixed number of times
    (counting and exploding it), whatever the number of batches."""
    from django.test.utils import CaptureQueriesContext

    settings.SB = {**settings.SB, "SPAWN_BATCH": 3}
    helpers.publish(workspace, "child", {"start": "t", "vertices": {
        "t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}})
    doc = helpers.fanout_doc("child", item_input=item_input)
    if per > 1:
        doc["vertices"]["fan"]["itemsPerChild"] = per
    helpers.publish(workspace, "parent", doc)
    counts = {}
    for items in (6, 30):
        parent = helpers.start(workspace, "parent", {"items": [{"i": i} for i in range(items)]})
        with CaptureQueriesContext(connection) as captured:
            helpers.run_engine()
        parent = helpers.refresh(parent)
        assert parent.status == "SUCCEEDED"
        assert sorted(c.item_index for c in parent.children.all()) == list(range(items // per))
        if per > 1:
            last = parent.children.get(item_index=items // per - 1)
            with connection.cursor() as cursor:
                loaded = payloads.load(cursor, [(last.pk, payloads.INPUT)])
            assert loaded[(last.pk, payloads.INPUT)] == {
                "items": [{"i": i} for i in range(items - per, items)], "first": items - per}
        counts[items] = list_reads(captured.captured_queries)
    assert counts[6] == counts[30], f"reads of the stored list grow with the batches: {counts}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM executions_fanoutitem")
        assert cursor.fetchone()[0] == 0, "spawned items leave the per-item store"


# --- the operator UI's duration sort reads an index, not every child ---------------------------

CHILDREN = """
    INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error, depth,
        request_hash, created_by, parent_id, root_id, spawn_vertex, item_index, created_at, started_at, finished_at)
    SELECT gen_random_uuid(), %(workspace)s, %(definition)s, %(version)s, 'SUCCEEDED', 1, '', 1, '', '',
           %(parent)s, %(parent)s, 'fan', i, now(), now() - interval '1 hour',
           now() - interval '1 hour' + (i %% 997) * interval '1 millisecond'
    FROM generate_series(0, %(n)s - 1) AS i
"""


@pytest.mark.parametrize("status", ["", "SUCCEEDED"])
def test_children_by_duration_is_an_index_range_not_a_sort_of_every_child(workspace, status):
    from executions.selectors import children

    version = helpers.publish(workspace, "one", {
        "start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}})
    parent = helpers.start(workspace, "one", {})
    with connection.cursor() as cursor:
        cursor.execute(CHILDREN, {"workspace": workspace.id, "definition": version.definition_id,
                                  "version": version.id, "parent": parent.pk, "n": FINISHED})
        cursor.execute("ANALYZE executions_execution")
    ranked = children.by_duration(parent.pk, "fan", status)[950:1000]
    found = json.loads(ranked.explain(format="json"))
    nodes = [s for s in scans(found) if s[1] == "executions_execution"]
    assert nodes == [("Index Scan", "executions_execution", "execution_child_round_duration")], nodes
    assert "Sort" not in json.dumps(found), "no sort of every child"
    slowest = list(ranked)
    assert len(slowest) == 50


def test_a_long_spawn_hands_over_in_slices_without_using_attempts(workspace, settings):
    """A 1,000,000-item spawn outlives a drain task (SB_Q_TIMEOUT): the spawner hands its step
    back (READY, due now, no attempt used) after SPAWN_SLICE_SECONDS and resumes at the
    committed cursor, instead of being killed mid-spawn and waiting out its lease."""
    settings.SB = {**settings.SB, "SPAWN_BATCH": 3, "SPAWN_SLICE_SECONDS": 0}
    helpers.publish(workspace, "child", {"start": "t", "vertices": {
        "t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}})
    helpers.publish(workspace, "parent", helpers.fanout_doc("child"))
    parent = helpers.start(workspace, "parent", {"items": list(range(20))})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED", (helpers.step(parent, "fan").__dict__, parent.children.count())
    assert sorted(c.item_index for c in parent.children.all()) == list(range(20))
    spawner = helpers.step(parent, "fan")
    assert spawner.attempt == 1, "handing over uses no attempt"
    slices = parent.events.filter(vertex="fan", message__contains="handed over").count()
    assert slices == 6, "one slice per batch after the first (7 batches of 3)"
    from executions.core import payloads

    with connection.cursor() as cursor:
        output = payloads.load(cursor, [(parent.pk, "fan")])[(parent.pk, "fan")]
    assert output == {"children": 20, "created": 20, "relinked": 0}, "the output counts the whole run"
