"""S28: the seed's recovery story holds with the seed's own MERGE configuration
(``tolerateChildFailures: ["FAILED"]``, ``maxFailureRatio: 0.05``, ``failFast: true``).

A failFast merge that fails cancels the unfinished children and stops its spawner (S18).
Retrying the failed children — the API's ``retry-failed``, the UI's "Retry all failed", or
retrying the spawner step — re-runs the FAILED children *and* the ones the failFast policy
cancelled (not those an operator cancelled), and spawns the items never started, exactly
once each (same keys); the merge re-evaluates and the parent can succeed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from executions.core import records
from executions.models import Execution, FanOutItem, Step
from executions.services import lifecycle as services
from tests.support import handlers, helpers
from tests.support.clients import api, ok, problem, text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

ITEMS = 600
SEED_MERGE = helpers.SEED_MERGE
# The child calls the destination (``test.flaky``: it refuses items with ``fail: true`` while
# the destination is down). Slow items wait first (a TIMER standing in for a slow call), so
# some children are still in flight when the merge fails.
CHILD = helpers.SLOW_OR_FLAKY


def _refused(index: int) -> bool:
    """The destination refuses one item in twelve (8.3%) until it is fixed."""
    return index % 12 == 5


def _slow(index: int) -> bool:
    return index % 10 == 3


def _run_until_quiet() -> None:
    """Run the engine, passing the slow children's timers, until nothing is left to run."""
    for _ in range(5):
        helpers.run_engine()
        if not Step.objects.filter(status__in=["READY", "RUNNING"]).exists():
            return
        helpers.make_due()


def _seed_fanout(workspace: Any, settings: Any, client: Any, items: int = ITEMS) -> str:
    """Start the seed's fan-out through the API and run it until the failFast merge fails.

    Small spawn batches, handed over after each one (``SPAWN_SLICE_SECONDS`` 0), let the
    children of early batches run — and fail — while the spawner is still walking the list,
    so the merge fails with children unfinished and items never started, deterministically."""
    settings.SB = {**settings.SB, "SPAWN_BATCH": 25, "SPAWN_SLICE_SECONDS": 0}
    handlers.set_flaky(True)  # the destination is down for some items
    helpers.publish(workspace, "child", CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config=SEED_MERGE))
    entries = [{"i": i, "fail": _refused(i), "slow": _slow(i)} for i in range(items)]
    parent = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {"items": entries}},
                            format="json"), 201)["id"]
    helpers.run_engine()
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "FAILED", detail
    assert "merge failed" in detail["error"]
    return str(parent)


def _fanout(client: Any, parent: str) -> dict[str, Any]:
    [fan] = ok(client.get(f"/api/v1/executions/{parent}"))["fanouts"]
    return fan


def _assert_recovered(client: Any, parent: str, items: int = ITEMS) -> None:
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "SUCCEEDED", (detail["error"], detail["fanouts"])
    per_item = (Execution.objects.filter(parent_id=parent).values("item_index").annotate(n=Count("id"))
                .order_by("item_index"))
    assert [(row["item_index"], row["n"]) for row in per_item] == [(i, 1) for i in range(items)], \
        "every item has exactly one child"
    assert helpers.child_counts(Execution.objects.get(pk=parent)) == {"SUCCEEDED": items}
    fan = _fanout(client, parent)
    assert fan["counts"]["SUCCEEDED"] == items and fan["spawn_complete"] and fan["created"] == items
    assert not FanOutItem.objects.filter(step__execution_id=parent).exists()


def test_the_seed_recovery_story_with_fail_fast(workspace: Any, settings: Any) -> None:
    client = api(workspace, "operator")
    parent = _seed_fanout(workspace, settings, client)
    before = _fanout(client, parent)["counts"]
    # The failure mode of the issue: stragglers cancelled and items never started.
    assert before["FAILED"] > 30 and before["CANCELLED"] > 0 and before["NEVER_STARTED"] > 0, before
    handlers.set_flaky(False)  # the destination is fixed
    retried = ok(client.post(f"/api/v1/executions/{parent}/children/retry-failed", format="json"))
    assert retried["retried"] == before["FAILED"] + before["CANCELLED"]
    _run_until_quiet()
    _assert_recovered(client, parent)
    # The re-run children kept their ids and keys: a new attempt each, never a second child.
    again = Execution.objects.filter(parent_id=parent, attempt=2)
    assert again.count() == before["FAILED"] + before["CANCELLED"]


def _expected(counts: dict[str, int]) -> dict[str, int]:
    """The preview of a retry right after the failFast merge failed: every FAILED child, every
    CANCELLED one (all cancelled by the policy here) and every item never started."""
    return {"retried": counts["FAILED"] + counts["CANCELLED"], "failed": counts["FAILED"],
            "cancelled_by_fail_fast": counts["CANCELLED"], "never_started": counts["NEVER_STARTED"]}


def test_the_preview_counts_what_the_retry_does(workspace: Any, settings: Any) -> None:
    client = api(workspace, "operator")
    parent = _seed_fanout(workspace, settings, client, items=300)
    url = f"/api/v1/executions/{parent}/children/retry-failed"
    expected = _expected(_fanout(client, parent)["counts"])
    assert expected["cancelled_by_fail_fast"] > 0 and expected["never_started"] > 0, expected
    assert ok(client.get(url)) == expected
    assert ok(client.get(url, {"spawner": "fan"})) == expected
    assert ok(client.get(url, {"spawner": "other"})) == {"retried": 0, "failed": 0, "cancelled_by_fail_fast": 0,
                                                         "never_started": 0}
    assert problem(client.get(url, {"spawner": "no such"}), 400)["errors"][0]["field"] == "spawner"
    assert problem(client.get(url, {"bogus": "1"}), 400)
    assert problem(api(workspace, "viewer").post(url, format="json"), 403)
    assert ok(api(workspace, "viewer").get(url)) == expected, "a viewer may see what a retry would do"
    handlers.set_flaky(False)
    assert ok(client.post(url, format="json")) == expected, "the retry does what the preview said"
    # Redrive: the merge waits again, the parent runs, the spawner resumes; counters are exact.
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    steps = {step["vertex"]: step["status"] for step in detail["steps"]}
    assert detail["status"] == "RUNNING" and steps == {"fan": "READY", "join": "WAITING"}, steps
    fan = _fanout(client, parent)
    assert (fan["counts"]["FAILED"], fan["counts"]["CANCELLED"]) == (0, 0)
    assert fan["counts"]["PENDING"] == expected["retried"]
    assert ok(client.get(url)) == {"retried": 0, "failed": 0, "cancelled_by_fail_fast": 0,
                                   "never_started": 0}, "nothing is left to retry"
    _run_until_quiet()
    _assert_recovered(client, parent, items=300)


def test_retrying_the_spawner_step_does_the_same(workspace: Any, settings: Any) -> None:
    client = api(workspace, "operator")
    parent = _seed_fanout(workspace, settings, client, items=300)
    counts = _fanout(client, parent)["counts"]
    assert counts["CANCELLED"] > 0 and counts["NEVER_STARTED"] > 0, counts
    spawner = helpers.step(Execution.objects.get(pk=parent), "fan")
    assert spawner.status == "SUCCEEDED", "failFast stopped it early"
    handlers.set_flaky(False)
    result = ok(client.post(f"/api/v1/executions/{parent}/steps/fan/retry"))
    assert result["step"]["vertex"] == "fan" and result["step"]["status"] == "READY"
    assert result["step"]["attempt"] == spawner.attempt + 1, "a new round (S16)"
    assert result["execution"]["status"] == "RUNNING"
    assert result["execution"]["counts"]["PENDING"] == counts["FAILED"] + counts["CANCELLED"]
    _run_until_quiet()
    _assert_recovered(client, parent, items=300)
    body = problem(client.post(f"/api/v1/executions/{parent}/steps/fan/retry"), 409)
    assert "only a FAILED step can be retried" in body["detail"]


def test_children_an_operator_cancelled_stay_cancelled(workspace: Any, settings: Any) -> None:
    """Half the children are slow; the destination works at first, so the fast ones succeed.
    An operator cancels one slow child; then the destination breaks, the slow children that
    call it fail, and the failFast merge fails, cancelling the other slow ones. A retry re-runs
    the failed and the failFast-cancelled children, never the one the operator cancelled."""
    settings.SB = {**settings.SB, "SPAWN_BATCH": 25, "SPAWN_SLICE_SECONDS": 0}
    helpers.publish(workspace, "child", CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={
        **SEED_MERGE, "tolerateChildFailures": ["FAILED", "CANCELLED"]}))  # the operator's cancel is tolerated
    client = api(workspace, "operator")
    entries = [{"i": i, "fail": _refused(i), "slow": i % 2 == 1} for i in range(200)]
    parent = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {"items": entries}},
                            format="json"), 201)["id"]
    helpers.run_engine()
    children = {c.item_index: c for c in Execution.objects.filter(parent_id=parent)}
    assert len(children) == 200 and _fanout(client, parent)["counts"]["SUCCEEDED"] == 100
    ok(client.post(f"/api/v1/executions/{children[1].pk}/cancel"))  # the operator's cancel
    handlers.set_flaky(True)  # the destination breaks: the refused ones among the slow children fail
    for index, child in children.items():
        if _refused(index):
            helpers.make_due(child)
    helpers.run_engine()
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "FAILED", detail["fanouts"]
    counts = detail["fanouts"][0]["counts"]
    refused = sum(1 for i in range(200) if _refused(i))
    assert (counts["FAILED"], counts["CANCELLED"]) == (refused, 100 - refused), counts
    url = f"/api/v1/executions/{parent}/children/retry-failed"
    expected = {"retried": 99, "failed": refused, "cancelled_by_fail_fast": 99 - refused, "never_started": 0}
    assert ok(client.get(url)) == expected
    handlers.set_flaky(False)
    assert ok(client.post(url, format="json")) == expected
    _run_until_quiet()
    assert ok(client.get(f"/api/v1/executions/{parent}"))["status"] == "SUCCEEDED"
    assert helpers.child_counts(Execution.objects.get(pk=parent)) == {"SUCCEEDED": 199, "CANCELLED": 1}
    kept = Execution.objects.get(pk=children[1].pk)
    assert (kept.status, kept.attempt, kept.cancel_cause) == ("CANCELLED", 1, "operator")
    assert dict(Step.objects.filter(execution=kept).values_list("vertex", "status")) == \
        {"route": "SUCCEEDED", "wait": "CANCELLED"}


def test_a_purged_tree_is_still_refused_and_nothing_moves(workspace: Any, settings: Any) -> None:
    client = api(workspace, "operator")
    parent = _seed_fanout(workspace, settings, client, items=300)
    before = _fanout(client, parent)
    Execution.objects.filter(pk=parent).update(payloads_purged_at=timezone.now())  # retention froze the tree
    body = problem(client.post(f"/api/v1/executions/{parent}/children/retry-failed", format="json"), 409)
    assert "payloads of its tree were deleted" in body["detail"]
    body = problem(client.post(f"/api/v1/executions/{parent}/steps/fan/retry"), 409)
    assert "payloads of its tree were deleted" in body["detail"]
    assert _fanout(client, parent) == before, "nothing half-written"
    assert Execution.objects.get(pk=parent).status == "FAILED"
    assert {s.vertex: s.status for s in Step.objects.filter(execution_id=parent)} == \
        {"fan": "SUCCEEDED", "join": "FAILED"}


def test_the_ui_confirms_with_the_counts(workspace: Any, settings: Any, operator: Any) -> None:
    parent = _seed_fanout(workspace, settings, api(workspace, "operator"), items=300)
    preview = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent}/children/retry-failed"))
    page = text(operator.get(reverse("ui:execution-detail", args=[parent])))
    what = (f"re-runs {preview['failed']:,} children that failed and {preview['cancelled_by_fail_fast']:,} "
            f"children that failFast cancelled, and spawns the {preview['never_started']:,} items never started")
    assert f"Retry all failed ({preview['retried']:,})" in page
    assert f"Retry the failed children of 'fan'? This re-runs {what[len('re-runs '):]}" in page
    assert page.count(what) == 2, "the fan-out's button and the spawner step's button say the same"
    handlers.set_flaky(False)
    response = operator.post(reverse("ui:retry-failed-children", args=[parent, "fan"]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert f"Retried {preview['retried']:,} children of 'fan': {what}." in text(response)
    event = AuditEvent.objects.get(action="execution.retry-failed-children")
    assert event.detail == {"spawner": "fan", "retried": preview["retried"],
                            "cancelled_by_fail_fast": preview["cancelled_by_fail_fast"],
                            "never_started": preview["never_started"]}
    _run_until_quiet()
    _assert_recovered(api(workspace, "viewer"), parent, items=300)


def test_nested_fan_outs_that_fail_fast_cancelled_are_re_run_whole(workspace: Any, settings: Any) -> None:
    """The failFast policy cancels a child and everything under it; the retry re-runs them
    all — the cancelled child's steps and its own cancelled children — so its fan-out ends."""
    settings.SB = {**settings.SB, "SPAWN_SLICE_SECONDS": 0}
    handlers.set_flaky(True)
    helpers.publish(workspace, "leaf", CHILD)
    helpers.publish(workspace, "middle", {"start": "check", "vertices": {
        "check": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}, "next": "fan"},
        "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "leaf", "next": "join"},
        "join": {"type": "MERGE", "spawner": "fan", "next": "done"},
        "done": {"type": "SUCCEED"}}})
    helpers.publish(workspace, "top", helpers.fanout_doc("middle", merge_config=SEED_MERGE))
    middles = [{"fail": m < 3, "items": [{"i": 0}, {"i": 1, "slow": True}]} for m in range(20)]
    top = helpers.start(workspace, "top", {"items": middles})
    helpers.run_engine()
    top = helpers.refresh(top)
    assert top.status == "FAILED", "3 failed middles exceed floor(0.05 × 20) = 1"
    cancelled = Execution.objects.filter(root=top, status="CANCELLED")
    assert cancelled.filter(depth=1).count() == 17 and cancelled.filter(depth=2).exists()
    assert set(cancelled.values_list("cancel_cause", flat=True)) == {"failFast"}
    client = api(workspace, "operator")
    url = f"/api/v1/executions/{top.pk}/children/retry-failed"
    assert ok(client.get(url)) == {"retried": 20, "failed": 3, "cancelled_by_fail_fast": 17, "never_started": 0}
    handlers.set_flaky(False)
    assert ok(client.post(url, format="json"))["retried"] == 20
    _run_until_quiet()
    assert helpers.refresh(top).status == "SUCCEEDED"
    assert set(Execution.objects.filter(root=top).values_list("status", flat=True)) == {"SUCCEEDED"}
    assert Execution.objects.filter(root=top, depth=2).count() == 40, "one leaf per item, no duplicates"


def test_held_children_that_fail_fast_cancelled_stay_held_when_re_run(workspace: Any) -> None:
    """maxConcurrency: a child whose first step was still held for a slot when failFast
    cancelled it is re-run held, and released in item order as slots free — a retry does
    not let every cancelled child run at once."""
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", CHILD)
    doc = helpers.fanout_doc(merge_config={"failFast": True})
    doc["vertices"]["fan"]["maxConcurrency"] = 4
    helpers.publish(workspace, "parent", doc)
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i < 2, "slow": i >= 2}
                                                           for i in range(40)]})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "FAILED"
    held = Step.objects.filter(execution__parent=parent, due_at=records.HELD_UNTIL)
    assert held.count() > 20, "most children were still waiting for a slot when failFast cancelled them"
    assert set(held.values_list("status", flat=True)) == {"CANCELLED"}
    still_held = held.count()
    handlers.set_flaky(False)
    counts = services.retry_failed_children(parent, actor="op")
    assert counts.retried == 40 - helpers.child_counts(parent).get("SUCCEEDED", 0)
    assert held.filter(status="READY", wait_reason=records.HELD_REASON).count() == still_held, \
        "re-run held, not all due at once"
    _run_until_quiet()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert helpers.child_counts(parent) == {"SUCCEEDED": 40}
