"""Live edits of a running fan-out (issue 31 §2, S25): maxConcurrency and the failure
tolerance are overrides on the fan-out row, audited, shown, and effective at once — the pinned
version and its hash never change."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Execution, FanOut, Step
from tests.support import handlers, helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

SLOW = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.fail", "equals": True}, "next": "boom"}],
              "default": "wait"},
    "boom": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}},
    "wait": {"type": "TIMER", "seconds": 3600},
}}


def _limited(workspace: Any, items: int, limit: int) -> Execution:
    helpers.publish(workspace, "child", helpers.NOOP)
    doc = helpers.fanout_doc()
    doc["vertices"]["fan"]["maxConcurrency"] = limit
    helpers.publish(workspace, "parent", doc)
    parent = helpers.start(workspace, "parent", {"items": list(range(items))})
    [spawner] = helpers.claim_runs()
    from executions.engine import runner as engine
    helpers.commit([(spawner, engine.execute(spawner))])
    return parent


def _edit(client: Any, parent: Execution, body: dict[str, Any], status: int = 200) -> Any:
    response = client.patch(f"/api/v1/executions/{parent.pk}/fanouts/fan", body, format="json")
    return ok(response, status) if status == 200 else problem(response, status)


def test_raising_max_concurrency_releases_held_children_at_the_next_claim(workspace: Any) -> None:
    parent = _limited(workspace, 6, 1)
    version = parent.version.hash
    assert len([c for c in helpers.claim() if c.vertex == "t"]) == 1
    client = api(workspace, "operator", name="ops")
    result = _edit(client, parent, {"maxConcurrency": 4})
    assert result["changes"] == {"maxConcurrency": [1, 4]} and result["max_concurrency"] == 4
    assert len([c for c in helpers.claim() if c.vertex == "t"]) == 3  # 4 in flight now
    read = ok(client.get(f"/api/v1/executions/{parent.pk}"))
    assert read["version"] == version and read["fanouts"][0]["max_concurrency"] == 4
    [edit] = read["fanout_edits"]
    assert edit["spawner_vertex"] == "fan" and edit["changes"] == {"maxConcurrency": [1, 4]}
    assert "ops" in edit["actor"]
    audit = AuditEvent.objects.get(action="fanout.edit")
    assert audit.outcome == "accepted" and audit.detail["changes"] == {"maxConcurrency": [1, 4]}


def test_lowering_max_concurrency_holds_back_children_and_null_lifts_the_limit(workspace: Any) -> None:
    parent = _limited(workspace, 8, 4)
    client = api(workspace, "operator")
    _edit(client, parent, {"maxConcurrency": 2})
    helpers.run_engine()  # the 4 released children finish; 2 more are released, then 2 more...
    assert helpers.refresh(parent).status == "SUCCEEDED"

    parent = _limited(workspace, 5, 1)
    _edit(client, parent, {"maxConcurrency": None})
    assert len([c for c in helpers.claim() if c.vertex == "t"]) == 5


def test_lowering_the_tolerance_fails_a_failfast_merge_at_once(workspace: Any) -> None:
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", SLOW)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}, "failFast": True}))
    items = [{"fail": i == 0, "slow": True} for i in range(4)]
    parent = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine()
    assert helpers.step(parent, "join").status == "WAITING"
    result = _edit(api(workspace, "operator"), parent, {"failureTolerance": {"maxFailures": 0}})
    assert result["changes"] == {"maxFailures": [None, 0]} and result["decided"] and result["exceeded"]
    assert helpers.step(parent, "join").status == "READY"  # re-evaluated at once
    helpers.run_engine()
    assert helpers.refresh(parent).status == "FAILED"
    assert not Execution.objects.filter(parent=parent, status__in=["PENDING", "RUNNING"]).exists()
    handlers.set_flaky(False)


def test_raising_the_tolerance_lets_a_running_merge_succeed(workspace: Any) -> None:
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", SLOW)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={"tolerateChildFailures": ["FAILED"],
                                                                          "failureTolerance": {"maxFailureRatio": 0}}))
    parent = helpers.start(workspace, "parent", {"items": [{"fail": i < 2} for i in range(4)]})
    helpers.run_engine()
    assert helpers.step(parent, "join").status == "WAITING"
    result = _edit(api(workspace, "operator"), parent, {"failureTolerance": {"maxFailureRatio": 0.5}})
    assert result["allowed_failures"] == 2 and not result["exceeded"]
    helpers.make_due(None)
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    fan = FanOut.objects.get(execution=parent)
    assert fan.max_failure_ratio == 0.5 and fan.allowed_failures == 2
    assert parent.version.hash == helpers.refresh(parent).version.hash
    handlers.set_flaky(False)


def test_bad_edits_are_refused_with_reasons_and_nothing_changes(workspace: Any) -> None:
    parent = _limited(workspace, 3, 1)
    client = api(workspace, "operator")
    for body in ({}, {"maxConcurrency": 0}, {"maxConcurrency": "3"}, {"failureTolerance": {}},
                 {"failureTolerance": {"maxFailureRatio": 1.5}}, {"failureTolerance": {"maxFailures": -1}},
                 {"other": 1}):
        _edit(client, parent, body, 400)
    problem(client.patch(f"/api/v1/executions/{parent.pk}/fanouts/nope", {"maxConcurrency": 2}, format="json"), 404)
    problem(api(workspace, "viewer").patch(f"/api/v1/executions/{parent.pk}/fanouts/fan", {"maxConcurrency": 2},
                                           format="json"), 403)
    assert FanOut.objects.get(execution=parent).max_concurrency == 1
    assert not FanOut.objects.get(execution=parent).edits.exists()
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    _edit(client, parent, {"maxConcurrency": 2}, 409)
    assert Step.objects.filter(execution__parent=parent, status="SUCCEEDED").count() == 3
