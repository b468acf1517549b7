"""Pause, drain and resume (issue 31 §1, S24): an execution tree, a workspace, a destination.

While paused nothing of it is claimed (grandchildren included) and its spawners create no
more children; steps already running finish and commit (``in_flight`` → ``drained``); timers
keep their due times; resume goes on where it stopped. Idempotent, audited, 409 when finished."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from executions.engine import runner as engine
from executions.models import Destination, Execution, Step
from executions.worker import work_pending
from tests.support import helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

LEAF_TIMER = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 3600}}}


def _tree(workspace: Any) -> Execution:
    """top → 2 mids → 3 leaves (each a TIMER of an hour), run until only the timers are left."""
    helpers.publish(workspace, "leaf", LEAF_TIMER)
    helpers.publish(workspace, "mid", helpers.fanout_doc("leaf"))
    helpers.publish(workspace, "top", helpers.fanout_doc("mid"))
    top = helpers.start(workspace, "top", {"items": [{"items": [1, 2]}, {"items": [3]}]})
    helpers.run_engine()
    assert Execution.objects.filter(root=top, depth=2).count() == 3
    return top


def _leaf_steps(top: Execution) -> list[Step]:
    return list(Step.objects.filter(execution__root=top, execution__depth=2).order_by("id"))


def _read(client: Any, execution: Execution) -> dict[str, Any]:
    return ok(client.get(f"/api/v1/executions/{execution.pk}"))


def test_a_paused_tree_is_not_claimed_down_to_its_grandchildren_and_resumes_at_its_timers(workspace: Any) -> None:
    top = _tree(workspace)
    client = api(workspace, "operator")
    due = [s.due_at for s in _leaf_steps(top)]
    paused = ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    assert paused["paused"] and paused["changed"] and paused["drained"] and paused["in_flight"] == 0
    assert [s.due_at for s in _leaf_steps(top)] == due  # timers keep their due times
    helpers.make_due(None)
    assert helpers.claim() == []
    assert not work_pending()  # an idle drain does not spin on paused work
    read = _read(client, top)
    assert read["paused"] and read["paused_scope"] == "execution" and read["drained"]
    mid = Execution.objects.get(parent=top, item_index=0)
    assert _read(client, mid)["paused_scope"] == "ancestor"

    resumed = ok(client.post(f"/api/v1/executions/{top.pk}/resume"))
    assert resumed["changed"] and not resumed["paused"]
    helpers.run_engine()
    assert helpers.refresh(top).status == "SUCCEEDED"


def test_a_timer_that_comes_due_during_the_pause_runs_after_the_resume_not_before(workspace: Any) -> None:
    top = _tree(workspace)
    client = api(workspace, "operator")
    ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    helpers.make_due(None)
    helpers.run_engine()
    assert {s.status for s in _leaf_steps(top)} == {"READY"}
    ok(client.post(f"/api/v1/executions/{top.pk}/resume"))
    helpers.run_engine()
    assert {s.status for s in _leaf_steps(top)} == {"SUCCEEDED"}


def test_pausing_a_child_holds_its_subtree_only(workspace: Any) -> None:
    top = _tree(workspace)
    client = api(workspace, "operator")
    first, second = Execution.objects.filter(parent=top).order_by("item_index")
    ok(client.post(f"/api/v1/executions/{first.pk}/pause"))
    helpers.make_due(None)
    claimed = helpers.claim()
    assert {c.execution_id for c in claimed} == set(
        Execution.objects.filter(parent=second).values_list("id", flat=True))


def test_the_spawner_of_a_paused_tree_creates_no_more_children(workspace: Any, settings: Any) -> None:
    settings.SB = {**settings.SB, "SPAWN_BATCH": 2, "SPAWN_SLICE_SECONDS": 60}
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(10))})
    [spawner] = helpers.claim_runs()
    client = api(workspace, "operator")
    assert ok(client.post(f"/api/v1/executions/{parent.pk}/pause"))["in_flight"] == 1
    helpers.commit([(spawner, engine.execute(spawner))])  # the running spawner ends its run: handed back
    assert Execution.objects.filter(parent=parent).count() == 0
    assert helpers.step(parent, "fan").status == "READY"
    assert helpers.claim() == []
    assert _read(client, parent)["drained"]
    ok(client.post(f"/api/v1/executions/{parent.pk}/resume"))
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert Execution.objects.filter(parent=parent).count() == 10


def test_a_step_running_when_the_pause_came_commits_and_the_tree_drains(workspace: Any) -> None:
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1, 2, 3]})
    [spawner] = helpers.claim_runs()
    helpers.commit([(spawner, engine.execute(spawner))])
    runs = [run for run in helpers.claim_runs(1)]
    client = api(workspace, "operator")
    paused = ok(client.post(f"/api/v1/executions/{parent.pk}/pause"))
    assert paused["in_flight"] == 1 and not paused["drained"]
    assert helpers.claim() == []
    helpers.commit([(run, engine.execute(run)) for run in runs])
    assert Step.objects.get(pk=runs[0].step_id).status == "SUCCEEDED"
    read = _read(client, parent)
    assert read["paused"] and read["in_flight"] == 0 and read["drained"]


def test_pause_and_resume_are_idempotent_audited_and_refused_for_a_finished_execution(workspace: Any) -> None:
    top = _tree(workspace)
    client = api(workspace, "operator", name="ops")
    first = ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    again = ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    assert not again["changed"] and again["paused_at"] == first["paused_at"]
    ok(client.post(f"/api/v1/executions/{top.pk}/resume"))
    assert not ok(client.post(f"/api/v1/executions/{top.pk}/resume"))["changed"]
    actions = list(AuditEvent.objects.filter(target=str(top.pk), action__startswith="execution.")
                   .order_by("id").values_list("action", "outcome"))
    assert actions == [("execution.pause", "accepted")] * 2 + [("execution.resume", "accepted")] * 2
    events = list(top.events.filter(message__contains="paused by").values_list("message", flat=True))
    assert len(events) == 1

    helpers.make_due(None)
    helpers.run_engine()
    assert helpers.refresh(top).status == "SUCCEEDED"
    body = problem(client.post(f"/api/v1/executions/{top.pk}/pause"), 409)
    assert "already SUCCEEDED" in body["detail"]
    problem(api(workspace, "viewer").post(f"/api/v1/executions/{top.pk}/pause"), 403)


def test_a_paused_execution_can_be_cancelled(workspace: Any) -> None:
    top = _tree(workspace)
    client = api(workspace, "operator")
    ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    ok(client.post(f"/api/v1/executions/{top.pk}/cancel"))
    assert not Execution.objects.filter(root=top, status__in=["PENDING", "RUNNING"]).exists()


def test_a_paused_workspace_starts_executions_that_wait_for_its_resume(workspace: Any, other_workspace: Any) -> None:
    helpers.publish(workspace, "one", helpers.NOOP)
    helpers.publish(other_workspace, "one", helpers.NOOP)
    problem(api(workspace, "operator").post("/api/v1/workspace/pause"), 403)
    admin = api(workspace, "admin")
    paused = ok(admin.post("/api/v1/workspace/pause"))
    assert paused["paused"] and paused["changed"]
    mine = ok(admin.post("/api/v1/executions", {"workflow": "one", "input": {}}, format="json"), 201)
    theirs = helpers.start(other_workspace, "one", {})
    assert {c.execution_id for c in helpers.claim()} == {theirs.pk}  # the other workspace runs on
    assert _read(admin, Execution.objects.get(pk=mine["id"]))["paused_scope"] == "workspace"
    assert ok(admin.get("/api/v1/workspace/pause"))["paused"]
    ok(admin.post("/api/v1/workspace/resume"))
    helpers.run_engine()
    assert Execution.objects.get(pk=mine["id"]).status == "SUCCEEDED"
    assert AuditEvent.objects.filter(action="workspace.pause", outcome="accepted").count() == 1


def test_a_paused_destination_keeps_its_limit_and_its_steps_wait(workspace: Any) -> None:
    destination = helpers.waiting_calls(workspace, 3, concurrency_limit=5)
    client = api(workspace, "operator")
    updated = ok(client.patch("/api/v1/destinations/api", {"paused": True}, format="json"))
    assert updated["paused"] and updated["concurrency_limit"] == 5
    assert helpers.claim() == []
    assert not work_pending()
    problem(client.patch("/api/v1/destinations/api", {"paused": "yes"}, format="json"), 400)
    ok(client.patch("/api/v1/destinations/api", {"paused": False}, format="json"))
    assert len(helpers.claim()) == 3
    destination.refresh_from_db()
    assert destination.concurrency_limit == 5 and not destination.paused


def test_a_limit_of_zero_still_stops_a_destination(workspace: Any) -> None:
    helpers.waiting_calls(workspace, 2, concurrency_limit=0)
    assert helpers.claim() == []
    Destination.objects.filter(name="api").update(concurrency_limit=2)
    assert len(helpers.claim()) == 2


def test_nothing_paused_costs_the_claim_no_walk(workspace: Any) -> None:
    """The pause predicate with an empty pause table: one InitPlan, no subplan per row, in the
    fair claim's take of plain steps (fairness.TAKE; BEYOND shares its predicate)."""
    helpers.publish(workspace, "one", helpers.NOOP)
    started = helpers.start(workspace, "one", {})
    from executions.core import fairness

    take = fairness.TAKE.replace("FOR UPDATE OF s SKIP LOCKED", "")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT TEXT) " + take,
                       {"ws": [workspace.id], "priorities": [3], "roots": [started.pk], "ns": [10]})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "InitPlan" in plan and "(never executed)" in plan, plan


def test_a_purged_tree_takes_its_pause_and_its_fan_out_edits_with_it(workspace: Any, settings: Any) -> None:
    from executions.core import retention
    from executions.models import FanOutEdit, Pause

    settings.SB = {**settings.SB, "PAYLOAD_RETENTION_SECONDS": 1.0, "RETENTION_SECONDS": 1.0}
    top = _tree(workspace)
    client = api(workspace, "operator")
    ok(client.patch(f"/api/v1/executions/{top.pk}/fanouts/fan", {"maxConcurrency": 5}, format="json"))
    ok(client.post(f"/api/v1/executions/{top.pk}/pause"))
    ok(client.post(f"/api/v1/executions/{top.pk}/cancel"))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_execution SET finished_at = now() - interval '1 hour' WHERE root_id = %s",
                       [top.pk])
    retention.run_pass()
    assert not Execution.objects.filter(root_id=top.pk).exists()
    assert not Pause.objects.exists() and not FanOutEdit.objects.exists()
