"""Quorum merges on PostgreSQL (S26, issue 31 §3): a MERGE with ``minSuccessful`` (or
``minSuccessfulRatio``) succeeds as soon as that many children succeeded — the spawner stops,
the unfinished children are cancelled with the reason ``the merge reached minSuccessful`` and
run no further step — and fails as soon as the quorum has become impossible (the failFast
logic, the pending children counted as possible successes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from executions.core import merge_rule
from executions.models import Event, Execution, FanOut, Step
from tests.support import helpers
from tests.support.clients import api, ok

pytestmark = pytest.mark.django_db

# A child per item: "ok" succeeds at once, "bad" fails, "wait" waits for a callback (it is
# still running when the others are done).
CHILD = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [
        {"when": {"path": "$.input", "equals": "ok"}, "next": "yes"},
        {"when": {"path": "$.input", "equals": "bad"}, "next": "no"}], "default": "hold"},
    "yes": {"type": "SUCCEED", "output": {"item": "$.input"}},
    "no": {"type": "FAIL", "error": "a bad item"},
    "hold": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600, "next": "after"},
    "after": {"type": "SUCCEED"}}}


def run_quorum(workspace: Any, items: list[str], config: dict[str, Any]) -> Execution:
    helpers.publish(workspace, "child", CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config=config))
    parent = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine()
    return parent


def stored_output(parent: Execution, name: str = "join") -> Any:
    with connection.cursor() as cursor:
        cursor.execute("SELECT data FROM executions_payload WHERE execution_id = %s AND name = %s", [parent.pk, name])
        row = cursor.fetchone()
    return json.loads(row[0]) if isinstance(row[0], str) else row[0]


def test_reached_with_children_still_running_cancels_them_with_the_reason(workspace):
    parent = run_quorum(workspace, ["wait", "ok", "wait", "ok", "bad", "wait"], {"minSuccessful": 2})
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert helpers.step(parent, "join").status == "SUCCEEDED"
    children = {c.item_index: c for c in Execution.objects.filter(parent=parent)}
    assert {i: c.status for i, c in children.items()} == {
        0: "CANCELLED", 1: "SUCCEEDED", 2: "CANCELLED", 3: "SUCCEEDED", 4: "FAILED", 5: "CANCELLED"}
    for index in (0, 2, 5):
        child = children[index]
        assert (child.cancel_cause, child.error) == ("quorum", "the merge reached minSuccessful")
        assert Event.objects.filter(execution=child, to_status="CANCELLED",
                                    message__startswith="the merge reached minSuccessful").exists()
        assert set(Step.objects.filter(execution=child).values_list("vertex", "status")) == {
            ("route", "SUCCEEDED"), ("hold", "CANCELLED")}, "the waiting step was cancelled"
    # Delivered: nothing of theirs is left to run, not even if a callback comes now.
    helpers.run_engine()
    assert not Step.objects.filter(execution__parent=parent, status__in=["READY", "RUNNING", "WAITING"]).exists()
    assert not Step.objects.filter(execution__parent=parent, vertex="after").exists()
    output = stored_output(parent)
    assert output == {"items": [{"item": "ok"}, {"item": "ok"}],
                      "counts": {"SUCCEEDED": 2, "FAILED": 1, "CANCELLED": 3, "NOT_STARTED": 0}}


def test_reached_stops_the_spawner_before_every_child_exists(workspace):
    """The quorum is reached while the spawner still spawns (batches of 2): it stops; the
    items never started are counted as such."""
    with override_settings(SB={**settings.SB, "SPAWN_BATCH": 2, "SPAWN_SLICE_SECONDS": 0}):
        helpers.publish(workspace, "child", CHILD)
        helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={"minSuccessful": 2}))
        parent = helpers.start(workspace, "parent", {"items": ["ok"] * 2 + ["wait"] * 2 + ["ok"] * 20})
        # The spawner's first batch; the children run; the merge decides; the spawner stops.
        for _ in range(10):
            helpers.run_engine(batch=1)
            if helpers.refresh(parent).is_terminal:
                break
    assert helpers.refresh(parent).status == "SUCCEEDED"
    fan = FanOut.objects.get(execution=parent)
    assert fan.created < fan.total, "the spawner stopped"
    assert not Step.objects.filter(execution__parent=parent, status__in=["READY", "RUNNING", "WAITING"]).exists()
    counts = stored_output(parent)["counts"]
    assert counts["SUCCEEDED"] >= 2 and counts["NOT_STARTED"] == fan.total - fan.created
    assert helpers.step(parent, "fan").status == "SUCCEEDED"


def test_impossible_fails_the_merge_at_once_and_cancels_the_rest(workspace):
    """3 of 5 must succeed; 3 fail: reaching 3 is impossible although 2 children still wait."""
    parent = run_quorum(workspace, ["bad", "wait", "bad", "wait", "bad"], {"minSuccessful": 3})
    failed = helpers.refresh(parent)
    assert failed.status == "FAILED" and "quorum: 3 must succeed" in failed.error
    assert helpers.child_counts(parent) == {"FAILED": 3, "CANCELLED": 2}
    assert set(Execution.objects.filter(parent=parent, status="CANCELLED").values_list("cancel_cause", flat=True)) \
        == {"failFast"}, "cancelled as failFast does (a retry of the failed children re-runs them, S28)"


def test_a_quorum_larger_than_the_fan_out_fails(workspace):
    parent = run_quorum(workspace, ["ok", "ok"], {"minSuccessful": 3})
    assert helpers.refresh(parent).status == "FAILED"


def test_the_ratio_form_rounds_up(workspace):
    """0.5 of 5 children is 3: two successes do not reach it, the third does."""
    parent = run_quorum(workspace, ["ok", "wait", "ok", "wait", "wait"], {"minSuccessfulRatio": 0.5})
    assert helpers.refresh(parent).status == "RUNNING", "2 of the 3 needed"
    assert FanOut.objects.get(execution=parent).min_successful == 3
    waiting = Execution.objects.filter(parent=parent, item_index=1).get()
    token = ok(api(workspace, "operator").get(f"/api/v1/executions/{waiting.pk}/steps/hold/callback"))["token"]
    ok(APIClient().post(f"/api/v1/callbacks/{token}", {"status": "SUCCEEDED"}, format="json"))
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert helpers.child_counts(parent) == {"SUCCEEDED": 3, "CANCELLED": 2}
    assert stored_output(parent)["items"] == [{"item": "ok"}, None, {"item": "ok"}], (
        "the succeeded children in item order (the one completed by callback has no output)")


def test_the_api_shows_the_quorum(workspace):
    parent = run_quorum(workspace, ["ok", "wait"], {"minSuccessful": 1})
    [fan] = ok(api(workspace).get(f"/api/v1/executions/{parent.pk}"))["fanouts"]
    assert fan["decided"] and not fan["exceeded"]
    assert "quorum: 1 must succeed (reached)" in fan["merge_state"]
    assert (fan["min_successful"], fan["reached"]) == (1, True)


@st.composite
def quorum_rows(draw: Any) -> dict[str, Any]:
    """A quorum fan-out's row as the planner writes it (the quorum as the tolerance), with
    counts: ended ≤ created ≤ total."""
    total = draw(st.integers(0, 30))
    needed = draw(st.integers(1, 35))
    created = draw(st.integers(0, total))
    succeeded = draw(st.integers(0, created))
    failed = draw(st.integers(0, created - succeeded))
    cancelled = draw(st.integers(0, created - succeeded - failed))
    return {"total": total, "created": created, "spawn_complete": draw(st.booleans()) or created == total,
            "succeeded": succeeded, "failed": failed, "cancelled": cancelled, "tolerates_failed": True,
            "tolerates_cancelled": True, "allowed_failures": max(total - needed, 0), "fail_fast": True,
            "min_successful": needed}


def test_the_databases_quorum_verdict_is_the_documented_one(workspace):
    """docs/dsl.md: succeeds once minSuccessful succeeded; fails once more than N − minSuccessful
    failed or were cancelled (or the quorum exceeds N); otherwise waits."""
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={"minSuccessful": 1}))
    parent = helpers.start(workspace, "parent", {"items": [1]})
    helpers.run_engine()
    fan = FanOut.objects.get(execution=parent)

    @hypothesis_settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(quorum_rows())
    def check(row: dict[str, Any]) -> None:
        FanOut.objects.filter(pk=fan.pk).update(**row)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {merge_rule.VERDICTS} FROM executions_fanout f WHERE f.step_id = %s", [fan.pk])
            names = [c.name for c in cursor.description]
            got = dict(zip(names, cursor.fetchone(), strict=True))
        reached = row["succeeded"] >= row["min_successful"]
        lost = row["total"] - row["failed"] - row["cancelled"] < row["min_successful"]
        assert not (reached and lost)
        assert (got["reached"], got["exceeded"]) == (reached, lost)
        assert got["decided"] == (reached or lost or (row["spawn_complete"] and row["succeeded"] + row["failed"]
                                                      + row["cancelled"] >= row["total"]))
        assert got["stops"] == (reached or lost)

    check()


def test_a_quorum_fan_outs_tolerance_cannot_be_edited_but_its_limit_can(workspace):
    """A quorum is the fan-out's tolerance (total − minSuccessful failures, failFast): a live
    edit of maxFailureRatio or maxFailures would silently replace it, so it is a 409 that
    changes nothing; maxConcurrency stays editable."""
    from executions.models import FanOutEdit

    parent = run_quorum(workspace, ["wait", "ok", "wait", "wait", "wait"], {"minSuccessful": 3})
    client = api(workspace, "operator")
    before = FanOut.objects.get(execution=parent)
    for body in ({"failureTolerance": {"maxFailures": 0}}, {"failureTolerance": {"maxFailureRatio": 0.5}}):
        response = client.patch(f"/api/v1/executions/{parent.pk}/fanouts/fan", body, format="json")
        assert response.status_code == 409, response.content
        assert "minSuccessful" in response.json()["detail"]
    after = FanOut.objects.get(execution=parent)
    assert (after.allowed_failures, after.max_failures, after.max_failure_ratio) == (
        before.allowed_failures, before.max_failures, before.max_failure_ratio)
    assert not FanOutEdit.objects.exists()
    ok(client.patch(f"/api/v1/executions/{parent.pk}/fanouts/fan", {"maxConcurrency": 2}, format="json"))
    assert FanOut.objects.get(execution=parent).max_concurrency == 2
