"""SPAWNER itemsPerChild and maxConcurrency (issue 16 §3), through the engine."""

from __future__ import annotations

from typing import Any

from django.db import connection

from executions.core import records, state
from executions.engine import runner as engine
from executions.models import Execution, FanOut, Step
from executions.selectors import payloads as payload_reads
from executions.services import lifecycle as services
from executions.ui import parts
from tests.support import helpers

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}}
FAIL_IF = helpers.FAIL_IF


def batched_doc(**spawner: Any) -> dict[str, Any]:
    doc = helpers.fanout_doc("child")
    doc["vertices"]["fan"].update(spawner)
    return doc


def children(parent: Execution) -> list[Execution]:
    return list(Execution.objects.filter(parent=parent).order_by("item_index"))


def child_inputs(parent: Execution) -> list[Any]:
    return [payload_reads.input_of(child) for child in children(parent)]


def run_one(vertex: str) -> None:
    """Claim every claimable step, run (and commit) only those of ``vertex``, hand back the rest."""
    runs = helpers.claim_runs(1000)
    mine = [run for run in runs if run.vertex.id == vertex]
    helpers.commit([(run, engine.execute(run)) for run in mine])
    others = [run.step_id for run in runs if run.vertex.id != vertex]
    if others:
        with connection.cursor() as cursor:
            state.release_steps(cursor, others, message="test: handed back")


# --- itemsPerChild ---------------------------------------------------------------------------------

def test_each_child_receives_consecutive_items(workspace: Any) -> None:
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(itemsPerChild=3, itemInput={
        "rows": "$.items", "batch": "$.index", "from": "$.firstItem", "tag": "$.input.tag"}))
    parent = helpers.start(workspace, "parent", {"items": [{"n": n} for n in range(10)], "tag": "t1"})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED"
    assert child_inputs(parent) == [
        {"rows": [{"n": 0}, {"n": 1}, {"n": 2}], "batch": 0, "from": 0, "tag": "t1"},
        {"rows": [{"n": 3}, {"n": 4}, {"n": 5}], "batch": 1, "from": 3, "tag": "t1"},
        {"rows": [{"n": 6}, {"n": 7}, {"n": 8}], "batch": 2, "from": 6, "tag": "t1"},
        {"rows": [{"n": 9}], "batch": 3, "from": 9, "tag": "t1"},
    ]
    fan = FanOut.objects.get(execution=parent)
    assert (fan.total, fan.succeeded, fan.items_per_child) == (4, 4, 3)
    assert helpers.step(parent, "fan").status == "SUCCEEDED"


def test_a_batch_child_receives_its_items_by_default(workspace: Any, settings: Any) -> None:
    settings.SB = {**settings.SB, "SPAWN_BATCH": 4}  # 2 children per transaction: several batches
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(itemsPerChild=2))
    parent = helpers.start(workspace, "parent", {"items": list(range(7))})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert child_inputs(parent) == [[0, 1], [2, 3], [4, 5], [6]]
    assert [c.item_index for c in children(parent)] == [0, 1, 2, 3]


def test_batch_keys_are_exactly_once_on_redelivery(workspace: Any) -> None:
    """A spawner re-walking its list (a redelivery) finds every batch's child already there."""
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(itemsPerChild=4))
    parent = helpers.start(workspace, "parent", {"items": list(range(10))})
    run_one("fan")
    assert len(children(parent)) == 3
    with connection.cursor() as cursor:  # the cursor rewound, as if the batches had not committed
        cursor.execute("UPDATE executions_fanout SET cursor = 0, spawn_complete = false")
        cursor.execute("UPDATE executions_step SET status = 'READY', due_at = now() WHERE vertex = 'fan'")
    run_one("fan")
    assert len(children(parent)) == 3
    assert helpers.step(parent, "fan").status == "SUCCEEDED"
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert child_inputs(parent) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_a_batch_whose_input_cannot_be_made_is_a_failed_child(workspace: Any) -> None:
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(itemsPerChild=3, itemInput={"third": "$.items[2]"}))
    parent = helpers.start(workspace, "parent", {"items": list(range(5))})
    helpers.run_engine()
    kids = children(parent)
    assert [k.status for k in kids] == ["SUCCEEDED", "FAILED"]
    assert "input could not be made from its items (child 1: items 3 to 5)" in kids[1].error
    assert helpers.refresh(parent).status == "FAILED"  # the merge tolerates nothing


def test_the_quota_counts_children_not_items(workspace: Any) -> None:
    workspace.plan.executions_per_day = 5
    workspace.plan.save()
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(itemsPerChild=10))
    parent = helpers.start(workspace, "parent", {"items": list(range(40))})  # 1 parent + 4 children
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert len(children(parent)) == 4


# --- maxConcurrency ------------------------------------------------------------------------------

def claimable_children(parent: Execution) -> set[int]:
    """Item indexes of the children whose first step a worker could claim now."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT e.item_index FROM executions_execution e JOIN executions_step s ON s.execution_id = e.id
            WHERE e.parent_id = %s AND s.status = 'READY' AND s.due_at <= now()""", [parent.pk])
        return {row[0] for row in cursor.fetchall()}


def test_at_most_max_concurrency_children_run_at_once(workspace: Any) -> None:
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(maxConcurrency=3))
    parent = helpers.start(workspace, "parent", {"items": list(range(10))})
    run_one("fan")
    kids = children(parent)
    assert len(kids) == 10 and {k.status for k in kids} == {"PENDING"}
    assert claimable_children(parent) == {0, 1, 2}
    held = Step.objects.get(execution=kids[5])
    assert parts.wait_reason(held, {}) == ("fan-out slot", records.HELD_REASON)  # as the execution view says
    finished: list[int] = []
    while len(finished) < 10:
        claimed = helpers.claim_runs(1000)
        runs = [run for run in claimed if run.execution.parent_id == parent.pk]
        assert 1 <= len(runs) <= 3, "never more than maxConcurrency children claimable"
        first = runs[0]  # one child finishes; the others (and the parent's merge) are handed back
        helpers.commit([(first, engine.execute(first))])
        finished.append(first.execution.item_index)
        with connection.cursor() as cursor:
            state.release_steps(cursor, [run.step_id for run in claimed if run is not first],
                                message="test: still running")
        running_or_ready = Execution.objects.filter(parent=parent).exclude(status="SUCCEEDED").count()
        assert len(claimable_children(parent)) == min(3, running_or_ready)
    assert sorted(finished) == list(range(10))
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"


def test_failed_and_bad_children_free_slots_correctly(workspace: Any) -> None:
    """A child failing frees its slot; a bad item's child (never ran) takes none."""
    helpers.publish(workspace, "child", FAIL_IF)
    helpers.publish(workspace, "parent", batched_doc(maxConcurrency=2, itemInput={"fail": "$.item.fail"}))
    items = [{"fail": i == 0} for i in range(6)]
    items[1] = {}  # a bad item: $.item.fail is missing
    parent = helpers.start(workspace, "parent", {"items": items})
    run_one("fan")
    assert claimable_children(parent) == {0, 2}
    assert children(parent)[1].status == "FAILED"
    helpers.run_engine()
    statuses = [k.status for k in children(parent)]
    assert statuses == ["FAILED", "FAILED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]
    assert FanOut.objects.get(execution=parent).free_slots == 2


def test_children_created_after_slots_freed_start_at_once(workspace: Any, settings: Any) -> None:
    """Batches spawned while earlier children finish: free slots go to the new children."""
    settings.SB = {**settings.SB, "SPAWN_BATCH": 2}
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(maxConcurrency=4))
    parent = helpers.start(workspace, "parent", {"items": list(range(9))})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert all(k.status == "SUCCEEDED" for k in children(parent)) and len(children(parent)) == 9


def test_cancelling_a_fanout_with_held_children_cancels_them(workspace: Any) -> None:
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", batched_doc(maxConcurrency=1))
    parent = helpers.start(workspace, "parent", {"items": list(range(5))})
    run_one("fan")
    services.cancel_execution(helpers.refresh(parent), actor="test")
    assert {k.status for k in children(parent)} == {"CANCELLED"}
    assert claimable_children(parent) == set()
