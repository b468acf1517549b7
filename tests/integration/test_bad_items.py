"""One bad item never stops a fan-out (issue 14 §4, S4, S17): an item whose child input
cannot be rendered becomes a FAILED child at its index; only errors of the list itself fail
the spawner."""

from __future__ import annotations

import pytest

from executions.models import Execution
from executions.services import lifecycle as services
from tests.support import helpers
from workflows.errors import Conflict

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}}


def children(parent: Execution) -> list[Execution]:
    return list(Execution.objects.filter(parent=parent).order_by("item_index"))


def test_an_item_without_the_rendered_path_is_a_failed_child_at_its_index(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", helpers.fanout_doc(
        "child", item_input={"id": "$.item.id"},
        merge_config={"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}))
    parent = helpers.start(workspace, "parent", {"items": [{"id": 1}, {}, {"id": 3}]})
    helpers.run_engine()
    kids = children(parent)
    assert [k.item_index for k in kids] == [0, 1, 2]
    assert [k.status for k in kids] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert "$.item.id" in kids[1].error and "item 1" in kids[1].error
    assert not kids[1].steps.exists(), "a child whose input could not be made runs nothing"
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED", "the merge counts it like any failed child (1 of 3 tolerated)"
    assert helpers.step(parent, "fan").status == "SUCCEEDED"


def test_without_tolerance_the_merge_fails_on_the_bad_item(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", helpers.fanout_doc("child", item_input={"id": "$.item.id"}))
    parent = helpers.start(workspace, "parent", {"items": [{"id": 1}, {"x": 2}]})
    helpers.run_engine()
    assert helpers.step(parent, "fan").status == "SUCCEEDED"
    assert helpers.refresh(parent).status == "FAILED"
    assert [k.status for k in children(parent)] == ["SUCCEEDED", "FAILED"]


def test_a_bad_item_child_cannot_be_retried_into_running_without_input(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", helpers.fanout_doc("child", item_input={"id": "$.item.id"}))
    parent = helpers.start(workspace, "parent", {"items": [{"id": 1}, {}]})
    helpers.run_engine()
    bad = children(parent)[1]
    with pytest.raises(Conflict, match="input could not be made from its item"):
        services.retry_execution(bad, actor="op")
    assert helpers.refresh(bad).status == "FAILED"


def test_errors_of_the_list_itself_still_fail_the_spawner(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", helpers.fanout_doc("child", item_input={"id": "$.item.id"}))
    parent = helpers.start(workspace, "parent", {"items": {"not": "a list"}})
    helpers.run_engine()
    fan = helpers.step(parent, "fan")
    assert fan.status == "FAILED" and "not a list" in fan.error
    assert not Execution.objects.filter(parent=parent).exists()
