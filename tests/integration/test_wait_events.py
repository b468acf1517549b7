"""WAIT for an event on real PostgreSQL (S27, issue 32): POST /api/v1/events resumes every
step of its workspace that waits for that name and whose match it satisfies, in one
statement; an id makes delivery idempotent; lookbackSeconds matches an event delivered
before the step began waiting; timeouts and cancel apply as to callbacks."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from executions.engine import runner as engine
from executions.models import Event, Execution
from tests.support import helpers
from tests.support.clients import api, ok, problem
from tests.support.threads import race

pytestmark = pytest.mark.django_db


def deployment_doc(lookback: float = 0, timeout: float = 600) -> dict[str, Any]:
    return {"start": "ready", "vertices": {
        "ready": {"type": "WAIT", "for": "event", "event": "deployment.ready", "timeoutSeconds": timeout,
                  "lookbackSeconds": lookback, "match": {"$.deploymentId": "$.input.id", "$.env": "$.input.env"},
                  "retry": {"maxAttempts": 1}}}}


def start_waiting(workspace: Any, key: str = "deploy", **start: Any) -> Execution:
    execution = helpers.start(workspace, key, {"env": "prod", **start})
    helpers.run_engine()
    return execution


def post(workspace: Any, body: dict[str, Any], role: str = "operator") -> Any:
    return api(workspace, role).post("/api/v1/events", body, format="json")


def test_an_event_resumes_exactly_the_steps_it_matches_with_its_data_as_output(workspace, other_workspace):
    helpers.publish(workspace, "deploy", deployment_doc())
    helpers.publish(other_workspace, "deploy", deployment_doc())
    mine = [start_waiting(workspace, id=f"d-{i % 2}") for i in range(4)]
    theirs = start_waiting(other_workspace, id="d-0")
    step = helpers.step(mine[0], "ready")
    assert step.status == "WAITING" and step.lease_token is None
    shown = ok(api(workspace, "viewer").get(f"/api/v1/executions/{mine[0].pk}"))["steps"][0]["waiting"]
    assert shown["kind"] == "event"
    assert shown["reason"] == 'Waiting for event deployment.ready with deploymentId = "d-0", env = "prod"'

    data = {"deploymentId": "d-0", "env": "prod", "url": "https://d-0.example"}
    assert ok(post(workspace, {"name": "deployment.ready", "data": data})) == {"delivered": 2}
    assert ok(post(workspace, {"name": "deployment.ready", "data": {**data, "env": "dev"}})) == {"delivered": 0}
    helpers.run_engine()
    assert [helpers.refresh(e).status for e in mine] == ["SUCCEEDED", "RUNNING", "SUCCEEDED", "RUNNING"]
    assert ok(api(workspace).get(f"/api/v1/executions/{mine[0].pk}"))["output"] == data
    assert helpers.step(theirs, "ready").status == "WAITING", "another workspace's wait is not touched"
    assert ok(post(workspace, {"name": "deployment.ready", "data": data})) == {"delivered": 0}, "once only"


def test_an_id_makes_delivery_idempotent(workspace):
    helpers.publish(workspace, "deploy", deployment_doc())
    first = start_waiting(workspace, id="d-1")
    event = {"name": "deployment.ready", "data": {"deploymentId": "d-1", "env": "prod"}, "id": "evt-1"}
    assert ok(post(workspace, event)) == {"delivered": 1}
    second = start_waiting(workspace, id="d-1")
    assert ok(post(workspace, event)) == {"delivered": 1}, "the first delivery's answer"
    assert helpers.step(second, "ready").status == "WAITING", "a repeat delivers nothing"
    assert "different event" in problem(post(workspace, {**event, "data": {"x": 1}}), 409)["detail"]
    helpers.run_engine()
    assert helpers.refresh(first).status == "SUCCEEDED"


def test_lookback_matches_an_event_delivered_before_the_step_began_waiting(workspace):
    helpers.publish(workspace, "deploy", deployment_doc(lookback=600))
    helpers.publish(workspace, "strict", deployment_doc(lookback=0))
    assert ok(post(workspace, {"name": "deployment.ready", "data": {"deploymentId": "d-7", "env": "prod"}})) == {
        "delivered": 0}
    early = start_waiting(workspace, id="d-7")
    helpers.run_engine()
    assert helpers.refresh(early).status == "SUCCEEDED", "the event had already happened"
    strict = start_waiting(workspace, "strict", id="d-7")
    assert helpers.step(strict, "ready").status == "WAITING", "without lookback, only later events count"
    other = start_waiting(workspace, id="d-8")
    assert helpers.step(other, "ready").status == "WAITING", "the earlier event does not match it"


def test_events_past_their_retention_are_not_looked_back_to(workspace, settings):
    helpers.publish(workspace, "deploy", deployment_doc(lookback=600))
    ok(post(workspace, {"name": "deployment.ready", "data": {"deploymentId": "d-9", "env": "prod"}}))
    settings.SB = {**settings.SB, "EVENT_RETENTION_SECONDS": 0}
    execution = start_waiting(workspace, id="d-9")
    assert helpers.step(execution, "ready").status == "WAITING"


def test_an_event_wait_times_out(workspace):
    helpers.publish(workspace, "deploy", deployment_doc(timeout=90))
    execution = start_waiting(workspace, id="d-2")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_step SET due_at = now() - interval '1 second' WHERE execution_id = %s",
                       [execution.pk])
    engine.reap()
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "timed out after 90s waiting for event deployment.ready" in failed.error
    assert ok(post(workspace, {"name": "deployment.ready", "data": {"deploymentId": "d-2", "env": "prod"}})) == {
        "delivered": 0}


def test_a_cancelled_step_gets_no_event(workspace):
    helpers.publish(workspace, "deploy", deployment_doc())
    execution = start_waiting(workspace, id="d-3")
    ok(api(workspace, "operator").post(f"/api/v1/executions/{execution.pk}/cancel"))
    assert ok(post(workspace, {"name": "deployment.ready", "data": {"deploymentId": "d-3", "env": "prod"}})) == {
        "delivered": 0}


@pytest.mark.parametrize(("body", "field"), [
    ({"data": {}}, "name"), ({"name": "bad name!"}, "name"), ({"name": "a", "id": ""}, "id"),
    ({"name": "a", "other": 1}, "other"), ({"name": 5}, "name"), ({"name": "a", "id": 5}, "id")])
def test_a_bad_event_is_a_400_naming_the_field(workspace, body, field):
    answer = problem(post(workspace, body), 400)
    assert field in {error["field"] for error in answer["errors"]}, answer


def test_a_viewer_may_not_post_events(workspace):
    problem(post(workspace, {"name": "a"}, role="viewer"), 403)


def test_a_wait_whose_match_path_is_missing_fails_with_the_path(workspace):
    helpers.publish(workspace, "deploy", deployment_doc())
    execution = helpers.start(workspace, "deploy", {"env": "prod"})
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "$.input.id" in failed.error


@pytest.mark.django_db(transaction=True)
def test_events_racing_steps_that_start_waiting_are_never_lost(workspace):
    """Each step starts waiting while its event is delivered (lookback covers the race
    window by a day): whichever commits first, the step resumes — never stays waiting."""
    helpers.publish(workspace, "deploy", deployment_doc(lookback=86400))
    executions = [helpers.start(workspace, "deploy", {"env": "prod", "id": f"r-{i}"}) for i in range(20)]

    def events() -> None:
        for i in range(20):
            ok(post(workspace, {"name": "deployment.ready", "data": {"deploymentId": f"r-{i}", "env": "prod"}}))

    race(helpers.run_engine, events)
    helpers.run_engine()
    assert {helpers.refresh(e).status for e in executions} == {"SUCCEEDED"}
    assert Event.objects.filter(to_status="WAITING", vertex="ready").count() <= 20
