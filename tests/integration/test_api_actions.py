"""Operator actions over the API (S9): retry a failed child or execution, retry a step,
retry every failed child, cancel — and the parent's merge re-evaluating afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Execution
from tests.support import handlers, helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

WAIT_OR_FAIL = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.fail", "equals": True}, "next": "boom"}],
              "default": "wait"},
    "boom": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}},
    "wait": {"type": "TIMER", "seconds": 3600},
}}


def _failed_fanout(workspace: Any, items: int = 6, failing: tuple[int, ...] = (1, 4)) -> str:
    """A fan-out whose parent failed on its merge because ``failing`` children failed; the
    failure heals (the flaky switch is off) before the test retries anything."""
    handlers.set_flaky(True)
    parent = helpers.run_fanout(workspace, items, failing=failing, child=helpers.FLAKY)
    assert parent.status == "FAILED"
    handlers.set_flaky(False)
    return str(parent.pk)


def _retried(failed: int) -> dict[str, int]:
    """The answer of a retry of ``failed`` FAILED children (none cancelled, none to spawn)."""
    return {"retried": failed, "failed": failed, "cancelled_by_fail_fast": 0, "never_started": 0}


def _failed_children(parent: str) -> list[str]:
    return [str(pk) for pk in Execution.objects.filter(parent_id=parent, status="FAILED")
            .order_by("item_index").values_list("pk", flat=True)]


def test_retrying_failed_children_lets_the_parent_succeed(workspace: Any) -> None:
    parent = _failed_fanout(workspace)
    client = api(workspace, "operator")
    failed = ok(client.get(f"/api/v1/executions/{parent}/children?status=FAILED"))["results"]
    assert [child["item_index"] for child in failed] == [1, 4]
    assert ok(client.post(f"/api/v1/executions/{parent}/children/retry-failed", format="json")) == _retried(2)
    helpers.run_engine()
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "SUCCEEDED", detail["error"]
    assert detail["counts"]["SUCCEEDED"] == 6 and detail["counts"]["FAILED"] == 0
    retried = ok(client.get(f"/api/v1/executions/{failed[0]['id']}"))
    assert retried["attempt"] == 2 and retried["id"] == failed[0]["id"]
    assert AuditEvent.objects.filter(action="execution.retry-failed-children", outcome="accepted").count() == 1


def test_retry_failed_children_of_one_spawner_and_with_nothing_to_retry(workspace: Any) -> None:
    parent = _failed_fanout(workspace)
    client = api(workspace, "operator")
    url = f"/api/v1/executions/{parent}/children/retry-failed"
    assert ok(client.post(url, {"spawner": "other"}, format="json")) == _retried(0)
    assert ok(client.post(url, {"spawner": "fan"}, format="json")) == _retried(2)
    assert ok(client.post(url, format="json")) == _retried(0)
    assert problem(client.post(url, {"spawner": 3}, format="json"), 400)["errors"][0]["field"] == "spawner"
    assert problem(client.post(url, [1], format="json"), 400)


def test_retrying_one_failed_child_keeps_its_id_and_starts_a_new_attempt(workspace: Any) -> None:
    parent = _failed_fanout(workspace)
    child = _failed_children(parent)[0]
    client = api(workspace, "operator")
    result = ok(client.post(f"/api/v1/executions/{child}/retry"))
    assert result["execution"]["id"] == child and result["execution"]["status"] == "PENDING"
    assert result["execution"]["attempt"] == 2
    assert result["step"]["vertex"] == "t" and result["step"]["status"] == "READY" and result["step"]["attempt"] == 2
    helpers.run_engine()
    assert ok(client.get(f"/api/v1/executions/{child}"))["status"] == "SUCCEEDED"
    assert ok(client.get(f"/api/v1/executions/{parent}"))["status"] == "FAILED"  # the other child still failed


def test_retrying_a_step(workspace: Any) -> None:
    parent = _failed_fanout(workspace)
    child = _failed_children(parent)[0]
    client = api(workspace, "operator")
    result = ok(client.post(f"/api/v1/executions/{child}/steps/t/retry"))
    assert result["step"]["status"] == "READY" and result["execution"]["status"] == "PENDING"
    assert problem(client.post(f"/api/v1/executions/{child}/steps/t/retry"), 409)["code"] == "conflict"
    assert "no step" in problem(client.post(f"/api/v1/executions/{child}/steps/nope/retry"), 404)["detail"]
    problem(client.post(f"/api/v1/executions/{child}/steps/bad%20vertex/retry"), 404)


def test_retrying_what_did_not_fail_is_409(workspace: Any) -> None:
    parent = _failed_fanout(workspace)
    succeeded = Execution.objects.filter(parent_id=parent, status="SUCCEEDED").first()
    assert succeeded is not None
    client = api(workspace, "operator")
    body = problem(client.post(f"/api/v1/executions/{succeeded.pk}/retry"), 409)
    assert "only a FAILED execution" in body["detail"]
    refusal = AuditEvent.objects.get(action="execution.retry")
    assert refusal.outcome == "refused" and "only a FAILED" in refusal.reason


def test_cancel_is_once_only(workspace: Any) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    execution = str(helpers.start(workspace, "flow", {}).pk)
    client = api(workspace, "operator")
    result = ok(client.post(f"/api/v1/executions/{execution}/cancel"))
    assert result["execution"]["status"] == "CANCELLED" and result["cancelled"] == 1
    assert problem(client.post(f"/api/v1/executions/{execution}/cancel"), 409)["detail"] == \
        "execution is already CANCELLED"


def test_children_of_a_cancelled_parent_cannot_be_retried(workspace: Any) -> None:
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", WAIT_OR_FAIL)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = str(helpers.start(workspace, "parent", {"items": [{"fail": True}, {"fail": False}]}).pk)
    helpers.run_engine()  # one child failed, the other waits on its timer; the merge waits for both
    client = api(workspace, "operator")
    cancelled = ok(client.post(f"/api/v1/executions/{parent}/cancel"))
    assert cancelled["cancelled"] == 2  # the parent and its waiting child; the failed one stays FAILED
    [child] = _failed_children(parent)
    assert "cancelled" in problem(client.post(f"/api/v1/executions/{child}/retry"), 409)["detail"]
    assert "cancelled" in problem(client.post(f"/api/v1/executions/{parent}/children/retry-failed"), 409)["detail"]


def test_actions_on_unknown_executions_are_404(workspace: Any) -> None:
    client = api(workspace, "operator")
    unknown = "00000000-0000-4000-8000-000000000000"
    for suffix in ("/retry", "/children/retry-failed", "/steps/t/retry", "/cancel"):
        problem(client.post(f"/api/v1/executions/{unknown}{suffix}", format="json"), 404)
