"""Operator UI actions: every POST checks CSRF and the operator role, is audited (accepted
or refused, with the reason) and goes through the same services as the API."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from demo import workflows as demo_workflows
from executions.models import Execution, Step
from tests.support import helpers
from tests.support.clients import client_for, text
from workflows.models import AuditEvent, Role

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def failed_fanout(workspace) -> Execution:
    return helpers.run_fanout(workspace, 8, failing=(2, 5))


def url(name: str, *args) -> str:
    return reverse(f"ui:{name}", args=args)


def audits(action: str) -> list[tuple[str, str, str]]:
    return list(AuditEvent.objects.filter(action=action).order_by("id").values_list("actor", "outcome", "reason"))


def test_operator_retries_one_failed_child(operator, failed_fanout):
    child = Execution.objects.get(parent=failed_fanout, item_index=5)
    response = operator.post(url("execution-retry", child.pk), **HTMX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "sb-changed"  # live fragments refresh themselves
    assert "Retried child #5" in text(response)
    assert helpers.refresh(child).status == "PENDING"
    assert helpers.refresh(child).attempt == 2
    assert helpers.refresh(failed_fanout).status == "RUNNING"  # its merge re-opened (redrive)
    assert audits("execution.retry") == [("user:op", "accepted", "")]


def test_retry_all_failed_children_records_how_many(operator, failed_fanout):
    response = operator.post(url("retry-failed-children", failed_fanout.pk, "fan"), **HTMX)
    assert response.status_code == 200
    assert helpers.child_counts(failed_fanout) == {"SUCCEEDED": 6, "PENDING": 2}
    event = AuditEvent.objects.get(action="execution.retry-failed-children")
    assert (event.actor, event.outcome, event.target) == ("user:op", "accepted", str(failed_fanout.pk))
    assert event.detail == {"spawner": "fan", "retried": 2}
    helpers.run_engine()  # demo.fail_if fails them again; the merge decides again
    assert helpers.refresh(failed_fanout).status == "FAILED"


def test_a_viewer_is_refused_and_the_refusal_is_audited(viewer, failed_fanout):
    child = Execution.objects.get(parent=failed_fanout, item_index=2)
    response = viewer.post(url("execution-retry", child.pk), **HTMX)
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#flash"
    message = "the viewer role cannot retry executions; it needs operator or above"
    assert message in text(response)
    assert helpers.refresh(child).status == "FAILED"
    assert audits("execution.retry") == [("user:view", "refused", message)]
    for action_url in [url("execution-cancel", failed_fanout.pk), url("retry-failed-children", failed_fanout.pk, "fan"),
                       url("step-retry", failed_fanout.pk, "join")]:
        assert viewer.post(action_url, **HTMX).status_code == 403


def test_posts_need_a_csrf_token(workspace, failed_fanout):
    client = client_for(workspace, Role.OPERATOR, "strict", enforce_csrf_checks=True)
    child = Execution.objects.get(parent=failed_fanout, item_index=2)
    assert client.post(url("execution-retry", child.pk), **HTMX).status_code == 403
    assert helpers.refresh(child).status == "FAILED"
    page = client.get(url("execution-detail", failed_fanout.pk))
    token = page.content.decode().split('"X-CSRFToken": "')[1].split('"')[0]  # what htmx sends (hx-headers)
    response = client.post(url("execution-retry", child.pk), HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200
    assert helpers.refresh(child).status == "PENDING"


def test_actions_are_post_only(operator, failed_fanout):
    assert operator.get(url("execution-retry", failed_fanout.pk)).status_code == 405
    assert operator.get(url("execution-cancel", failed_fanout.pk)).status_code == 405


def test_refusals_are_4xx_with_the_service_message(operator, failed_fanout, workspace):
    succeeded = Execution.objects.get(parent=failed_fanout, item_index=0)
    response = operator.post(url("execution-retry", succeeded.pk), **HTMX)
    assert response.status_code == 409
    assert "only a FAILED execution can be retried; this one is SUCCEEDED" in text(response)
    unknown = uuid.uuid4()
    response = operator.post(url("execution-retry", unknown), **HTMX)
    assert response.status_code == 404
    assert f"no execution {unknown}" in response.content.decode()
    assert operator.post(url("step-retry", failed_fanout.pk, "nope"), **HTMX).status_code == 404
    assert operator.post(url("execution-cancel", failed_fanout.pk), **HTMX).status_code == 409
    assert [outcome for _, outcome, _ in audits("execution.retry")] == ["refused", "refused"]


def test_another_workspaces_execution_cannot_be_touched(operator, other_workspace):
    helpers.publish(other_workspace, "child", helpers.FAIL_IF)
    foreign = helpers.start(other_workspace, "child", {"fail": True})
    helpers.run_engine()
    assert helpers.refresh(foreign).status == "FAILED"
    assert operator.post(url("execution-retry", foreign.pk), **HTMX).status_code == 404
    assert helpers.refresh(foreign).status == "FAILED"


def test_cancel_an_execution(operator, workspace):
    helpers.publish(workspace, "hello", demo_workflows.HELLO)
    execution = helpers.start(workspace, "hello", {"who": "ops"})
    response = operator.post(url("execution-cancel", execution.pk), **HTMX)
    assert response.status_code == 200
    assert helpers.refresh(execution).status == "CANCELLED"
    event = AuditEvent.objects.get(action="execution.cancel")
    assert (event.outcome, event.detail) == ("accepted", {"cancelled": 1})


def test_retry_a_failed_spawner_step(operator, workspace):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    execution = helpers.start(workspace, "parent", {"items": "not a list"})
    helpers.run_engine()
    assert helpers.refresh(execution).status == "FAILED"
    page = operator.get(url("execution-detail", execution.pk)).content.decode()
    assert "Retry spawner step" in page
    response = operator.post(url("step-retry", execution.pk, "fan"), **HTMX)
    assert response.status_code == 200
    assert Step.objects.get(execution=execution, vertex="fan").status == "READY"
    assert AuditEvent.objects.get(action="step.retry").target == f"{execution.pk}/fan"


def test_without_htmx_an_action_redirects_back_with_a_message(operator, failed_fanout):
    child = Execution.objects.get(parent=failed_fanout, item_index=2)
    response = operator.post(url("execution-retry", child.pk), follow=True)
    assert response.redirect_chain == [(url("execution-detail", child.pk), 302)]
    assert "Retried child #2" in text(response)

