"""The operator UI for waits (S27, issue 32): a waiting step says what it waits for and until
when; an operator completes or fails a waiting callback step (audited; a viewer may not);
the execution list filters executions with steps waiting for callbacks or events."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Execution
from tests.support import helpers
from tests.support.clients import text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

APPROVAL = {"start": "approve", "vertices": {
    "approve": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600, "heartbeatSeconds": 600,
                "retry": {"maxAttempts": 1}}}}
DEPLOY = {"start": "ready", "vertices": {
    "ready": {"type": "WAIT", "for": "event", "event": "deployment.ready", "timeoutSeconds": 600,
              "match": {"$.id": "$.input.id"}}}}


def waiting(workspace: Any, key: str, doc: dict[str, Any], data: Any) -> Execution:
    helpers.publish(workspace, key, doc)
    execution = helpers.start(workspace, key, data)
    helpers.run_engine()
    return execution


def test_the_execution_view_says_what_a_step_waits_for(workspace, operator):
    approval = waiting(workspace, "approval", APPROVAL, {})
    deploy = waiting(workspace, "deploy", DEPLOY, {"id": "d-42"})
    page = text(operator.get(f"/executions/{approval.pk}/steps"))
    assert "Waiting for a callback" in page and "since" in page and "times out at" in page
    assert "next heartbeat due by" in page
    assert "Complete" in page and "Fail" in page
    page = text(operator.get(f"/executions/{deploy.pk}/steps"))
    assert 'Waiting for event deployment.ready with id = "d-42"' in page
    assert "Complete</button>" not in page, "an event wait is completed by its event, not by hand"


def test_a_viewer_sees_no_buttons_and_is_refused(workspace, viewer):
    approval = waiting(workspace, "approval", APPROVAL, {})
    assert "Complete</button>" not in text(viewer.get(f"/executions/{approval.pk}/steps"))
    response = viewer.post(f"/executions/{approval.pk}/steps/approve/complete", {"status": "SUCCEEDED"})
    assert response.status_code == 403
    assert helpers.step(approval, "approve").status == "WAITING"
    assert AuditEvent.objects.filter(action="step.complete", outcome="refused").count() == 1


def test_an_operator_completes_a_waiting_step_with_an_output(workspace, operator):
    approval = waiting(workspace, "approval", APPROVAL, {})
    response = operator.post(f"/executions/{approval.pk}/steps/approve/complete",
                             {"status": "SUCCEEDED", "input": '{"approved": true}'}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    helpers.run_engine()
    assert helpers.refresh(approval).status == "SUCCEEDED"
    [audit] = AuditEvent.objects.filter(action="step.complete", outcome="accepted")
    assert audit.target == f"{approval.pk}/approve" and audit.detail == {"status": "SUCCEEDED"}


def test_an_operator_fails_a_waiting_step_with_the_prompted_reason(workspace, operator):
    approval = waiting(workspace, "approval", APPROVAL, {})
    url = f"/executions/{approval.pk}/steps/approve/complete"
    assert operator.post(url, {"status": "FAILED"}).status_code == 400, "a failure needs a reason"
    assert operator.post(url, {"status": "SUCCEEDED", "input": "{nope"}).status_code == 400
    response = operator.post(url, {"status": "FAILED"}, HTTP_HX_REQUEST="true", HTTP_HX_PROMPT="over budget")
    assert response.status_code == 200, response.content
    helpers.run_engine()
    failed = helpers.refresh(approval)
    assert failed.status == "FAILED" and "over budget" in failed.error
    assert operator.post(url, {"status": "SUCCEEDED"}).status_code == 409


def test_the_list_filters_executions_waiting_for_callbacks_or_events(workspace, operator):
    approval = waiting(workspace, "approval", APPROVAL, {})
    deploy = waiting(workspace, "deploy", DEPLOY, {"id": "d-1"})
    helpers.publish(workspace, "noop", helpers.NOOP)
    done = helpers.start(workspace, "noop", {})
    helpers.run_engine()

    def listed(query: str) -> set[str]:
        page = text(operator.get(f"/executions/?{query}"))
        return {str(e.pk)[:8] for e in (approval, deploy, done) if str(e.pk)[:8] in page}

    assert listed("waiting=callback") == {str(approval.pk)[:8]}
    assert listed("waiting=event") == {str(deploy.pk)[:8]}
    assert listed("waiting=any") == {str(approval.pk)[:8], str(deploy.pk)[:8]}
    assert len(listed("")) == 3
    assert operator.get("/executions/?waiting=sometimes").status_code == 400


def test_the_api_lists_executions_waiting_for_callbacks_or_events(workspace):
    from tests.support.clients import api, ok, problem

    approval = waiting(workspace, "approval", APPROVAL, {})
    deploy = waiting(workspace, "deploy", DEPLOY, {"id": "d-1"})
    client = api(workspace, "viewer")

    def listed(kind: str) -> set[str]:
        return {row["id"] for row in ok(client.get(f"/api/v1/executions?waiting={kind}"))["results"]}

    assert listed("callback") == {str(approval.pk)}
    assert listed("event") == {str(deploy.pk)}
    assert listed("any") == {str(approval.pk), str(deploy.pk)}
    assert problem(client.get("/api/v1/executions?waiting=never"), 400)["errors"][0]["field"] == "waiting"
