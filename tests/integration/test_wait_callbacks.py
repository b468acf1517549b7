"""WAIT for a callback on real PostgreSQL (S27, issue 32): the step waits holding no worker,
its token completes it once (a repeat is a no-op, a different completion a 409, an unknown
token a 404, a revoked one a 410, none of them writing anything), FAILED follows the retry
policy with a new token, and timeouts, heartbeats and cancel revoke it."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from executions.engine import runner as engine
from executions.models import Event, Execution, Step, Wait
from tests.support import helpers
from tests.support.clients import api, ok, problem
from tests.support.threads import race
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

APPROVAL = {"start": "approve", "vertices": {
    "approve": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600, "retry": {"maxAttempts": 2,
                                                                                     "backoffSeconds": 0},
                "next": "done"},
    "done": {"type": "SUCCEED", "output": {"approved": "$.steps.approve.output"}}}}


def waiting_execution(workspace: Any, doc: dict[str, Any] = APPROVAL, data: Any = None) -> Execution:
    helpers.publish(workspace, "approval", doc)
    execution = helpers.start(workspace, "approval", data or {})
    helpers.run_engine()
    return execution


def token_of(workspace: Any, execution: Execution, vertex: str = "approve") -> str:
    body = ok(api(workspace, "operator").get(f"/api/v1/executions/{execution.pk}/steps/{vertex}/callback"))
    assert body["url"].endswith(f"/api/v1/callbacks/{body['token']}")
    return str(body["token"])


def callback(token: str, body: Any, **extra: Any) -> Any:
    return APIClient().post(f"/api/v1/callbacks/{token}", body, format="json", **extra)


def rows_written() -> tuple[int, int, int]:
    """Events, completed waits and audit rows: what a refused callback must not add to."""
    return Event.objects.count(), Wait.objects.filter(completion__isnull=False).count(), AuditEvent.objects.count()


def move_due(step: Step, seconds: float = -1) -> None:
    """Bring a waiting step's due time (its timeout or heartbeat deadline) to now + seconds."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_step SET due_at = now() + make_interval(secs => %s) WHERE id = %s",
                       [seconds, step.pk])


def seconds_until_due(step: Step) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM due_at - now()) FROM executions_step WHERE id = %s", [step.pk])
        return float(cursor.fetchone()[0])


def test_a_waiting_step_holds_no_worker_and_its_callback_completes_it(workspace):
    execution = waiting_execution(workspace)
    step = helpers.step(execution, "approve")
    assert step.status == "WAITING" and step.lease_token is None and step.lease_expires_at is None
    assert 3590 < seconds_until_due(step) <= 3600, "the timeout is a due time in the database"
    assert helpers.refresh(execution).status == "RUNNING"
    shown = ok(api(workspace, "viewer").get(f"/api/v1/executions/{execution.pk}"))["steps"][0]
    assert shown["status"] == "WAITING" and shown["waiting"]["kind"] == "callback"
    assert shown["waiting"]["reason"] == "Waiting for a callback" and shown["waiting"]["next_check_at"]

    answer = ok(callback(token_of(workspace, execution), {"status": "SUCCEEDED", "output": {"by": "alice"}}))
    assert answer == {"status": "SUCCEEDED", "output": {"by": "alice"}, "changed": True}
    helpers.run_engine()
    finished = helpers.refresh(execution)
    assert finished.status == "SUCCEEDED"
    assert ok(api(workspace).get(f"/api/v1/executions/{execution.pk}"))["output"] == {"approved": {"by": "alice"}}


def test_a_repeat_is_a_no_op_a_different_completion_a_409(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    ok(callback(token, {"status": "SUCCEEDED", "output": [1, 2]}))
    before = rows_written()
    again = ok(callback(token, {"status": "SUCCEEDED", "output": [1, 2]}))
    assert again == {"status": "SUCCEEDED", "output": [1, 2], "changed": False}
    assert "different result" in problem(callback(token, {"status": "SUCCEEDED", "output": [3]}), 409)["detail"]
    problem(callback(token, {"status": "FAILED", "error": "no"}), 409)
    assert rows_written() == before
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    assert ok(callback(token, {"status": "SUCCEEDED", "output": [1, 2]}))["changed"] is False, \
        "still the same answer after the step finished"


@pytest.mark.django_db(transaction=True)
def test_a_thousand_concurrent_duplicates_resume_the_step_exactly_once(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    from executions.services import waits as services

    done = services.completion("SUCCEEDED", {"ok": True})
    answers = race(*[lambda: services.complete_callback(token, done) for _ in range(16)], timeout=120)
    answers += [services.complete_callback(token, done) for _ in range(1000 - 16)]
    assert sum(answer.changed for answer in answers) == 1
    resumed = Event.objects.filter(execution_id=execution.pk, vertex="approve", from_status="WAITING",
                                   to_status="READY")
    assert resumed.count() == 1
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"


def test_an_unknown_token_is_a_404_counted_per_address_then_a_429(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    before = Event.objects.count()
    with override_settings(SB={**settings.SB, "AUTH_FAILURES_LIMIT": 3, "AUTH_FAILURE_WINDOW_SECONDS": 600}):
        for bad in ("x" * 43, "not a token", token[:-1] + ("A" if token[-1] != "A" else "B")):
            assert problem(callback(bad, {"status": "SUCCEEDED"}), 404)["detail"] == "no such callback token"
        assert problem(callback(token, {"status": "SUCCEEDED"}), 429)["status"] == 429, "the address is throttled"
        assert problem(APIClient().post(f"/api/v1/callbacks/{token}/heartbeat"), 429)
        other = APIClient(REMOTE_ADDR="10.0.0.9")
        assert other.post(f"/api/v1/callbacks/{token}", {"status": "SUCCEEDED"}, format="json").status_code == 200
    assert helpers.step(execution, "approve").status == "READY"
    assert Event.objects.count() == before + 1, "only the accepted callback wrote"


def test_a_body_over_the_cap_is_a_413_before_it_is_parsed(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    with override_settings(SB={**settings.SB, "CALLBACK_MAX_BYTES": 100}):
        body = problem(callback(token, {"status": "SUCCEEDED", "output": "x" * 200}), 413)
        assert "SB_CALLBACK_MAX_BYTES" in body["detail"]
        garbage = APIClient().post(f"/api/v1/callbacks/{token}", "{" * 500, content_type="application/json")
        problem(garbage, 413)
    assert helpers.step(execution, "approve").status == "WAITING"


@pytest.mark.parametrize(("body", "field"), [
    ({"status": "DONE"}, "status"), ({"status": "FAILED"}, "error"), ({"status": "SUCCEEDED", "error": "x"}, "error"),
    ({"status": "FAILED", "error": "x", "output": 1}, "output"), ({"status": "SUCCEEDED", "extra": 1}, "extra"),
    ({}, "status")])
def test_a_bad_completion_is_a_400_naming_the_field(workspace, body, field):
    execution = waiting_execution(workspace)
    answer = problem(callback(token_of(workspace, execution), body), 400)
    assert field in {error["field"] for error in answer["errors"]}, answer
    assert helpers.step(execution, "approve").status == "WAITING"


def test_failed_follows_the_retry_policy_with_a_new_token_and_the_old_one_is_gone(workspace):
    execution = waiting_execution(workspace)
    first = token_of(workspace, execution)
    ok(callback(first, {"status": "FAILED", "error": "the partner refused"}))
    helpers.run_engine()
    step = helpers.step(execution, "approve")
    assert step.status == "WAITING" and step.attempt == 2, "a retry waits again"
    second = token_of(workspace, execution)
    assert second != first
    before = rows_written()
    assert ok(callback(first, {"status": "FAILED", "error": "the partner refused"}))["changed"] is False
    problem(callback(first, {"status": "SUCCEEDED"}), 409)
    assert rows_written() == before
    ok(callback(second, {"status": "FAILED", "error": "still no"}))
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "still no" in failed.error
    assert problem(callback(second, {"status": "SUCCEEDED"}), 409)["status"] == 409, "completed (FAILED) already"


def test_a_timeout_fails_the_attempt_under_the_retry_policy_and_revokes_the_token(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    step = helpers.step(execution, "approve")
    move_due(step)
    engine.reap()
    helpers.run_engine()
    step = helpers.step(execution, "approve")
    assert step.status == "WAITING" and step.attempt == 2
    assert step.error == "timed out after 3600s waiting for a callback"
    assert "retried" in problem(callback(token, {"status": "SUCCEEDED"}), 410)["detail"]
    move_due(step)
    engine.reap()
    assert "timed out" in problem(callback(token_of_attempt(step), {"status": "SUCCEEDED"}), 410)["detail"]
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "timed out after 3600s waiting for a callback" in failed.error


def token_of_attempt(step: Step) -> str:
    from executions.core import waits

    wait = Wait.objects.get(step_id=step.pk, attempt=step.attempt)
    return waits.token_for(step.pk, step.attempt, wait.nonce)


def test_heartbeats_extend_the_deadline_and_a_missed_one_times_out(workspace):
    doc = {"start": "approve", "vertices": {"approve": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600,
                                                        "heartbeatSeconds": 30, "retry": {"maxAttempts": 1}}}}
    execution = waiting_execution(workspace, doc)
    token = token_of(workspace, execution)
    step = helpers.step(execution, "approve")
    assert 20 < seconds_until_due(step) <= 30
    move_due(step, 5)
    answer = ok(APIClient().post(f"/api/v1/callbacks/{token}/heartbeat"))
    assert answer["heartbeat_due_at"] and answer["times_out_at"]
    assert 20 < seconds_until_due(step) <= 30, "the heartbeat moved the deadline"
    move_due(step)
    engine.reap()
    problem(APIClient().post(f"/api/v1/callbacks/{token}/heartbeat"), 410)
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "timed out after 30s waiting for a heartbeat" in failed.error


def test_cancel_revokes_the_token(workspace):
    execution = waiting_execution(workspace)
    token = token_of(workspace, execution)
    ok(api(workspace, "operator").post(f"/api/v1/executions/{execution.pk}/cancel"))
    assert helpers.step(execution, "approve").status == "CANCELLED"
    before = rows_written()
    assert "cancelled" in problem(callback(token, {"status": "SUCCEEDED"}), 410)["detail"]
    problem(APIClient().post(f"/api/v1/callbacks/{token}/heartbeat"), 410)
    assert rows_written() == before
    problem(api(workspace, "operator").get(f"/api/v1/executions/{execution.pk}/steps/approve/callback"), 404)


def test_an_operator_completes_a_waiting_step_audited_and_a_viewer_may_not(workspace):
    execution = waiting_execution(workspace)
    url = f"/api/v1/executions/{execution.pk}/steps/approve/complete"
    problem(api(workspace, "viewer").post(url, {"status": "SUCCEEDED"}, format="json"), 403)
    problem(api(workspace, "viewer").get(f"/api/v1/executions/{execution.pk}/steps/approve/callback"), 403)
    answer = ok(api(workspace, "operator", name="ops").post(url, {"status": "SUCCEEDED", "output": "yes"},
                                                             format="json"))
    assert answer["changed"] is True
    audit = list(AuditEvent.objects.filter(action="step.complete").order_by("id"))
    assert [a.outcome for a in audit] == ["refused", "accepted"]
    assert audit[-1].target == f"{execution.pk}/approve" and audit[-1].actor.endswith("ops")
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    problem(api(workspace, "operator").post(url, {"status": "SUCCEEDED"}, format="json"), 409)


def test_a_wait_without_a_timeout_is_refused_with_its_path(workspace):
    doc = {"start": "w", "vertices": {"w": {"type": "WAIT", "for": "callback"}}}
    body = problem(api(workspace, "author").post("/api/v1/workflows/w/versions", doc, format="json"), 400)
    assert any(e["path"].startswith("$.vertices.w") and "timeoutSeconds" in e["message"] for e in body["errors"])


def test_a_woken_step_whose_worker_is_lost_keeps_its_callback_result(workspace):
    """The callback was accepted (200): a worker lost while it turns the result into the
    step's outcome must not lose it — the next attempt finishes with it, it does not wait again."""
    execution = waiting_execution(workspace)
    ok(callback(token_of(workspace, execution), {"status": "SUCCEEDED", "output": {"kept": True}}))
    [run] = helpers.claim_runs()
    assert run.vertex.id == "approve"
    helpers.lose_leases()
    step = helpers.step(execution, "approve")
    assert (step.status, step.attempt, step.lease_expiries) == ("READY", 2, 1)
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    assert ok(api(workspace).get(f"/api/v1/executions/{execution.pk}"))["output"] == {"approved": {"kept": True}}
    assert Wait.objects.filter(step_id=step.pk).count() == 1, "no second wait"
