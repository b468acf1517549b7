"""An approval in a real browser, on a real qcluster (S27, issue 32): a WAIT step waits for
a callback holding no worker; the operator sees what it waits for and until when, fails it
once with a reason (the retry policy gives it a new wait), then completes it — audited —
and the execution goes on and succeeds without a reload."""

import pytest
from playwright.sync_api import expect

from executions.models import Step
from executions.services import lifecycle as services
from tests.support import factories, helpers
from tests.support.cluster import wait_for
from workflows.models import AuditEvent

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(240)]

APPROVAL = {"start": "approve", "vertices": {
    "approve": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600,
                "retry": {"maxAttempts": 2, "backoffSeconds": 0}, "next": "pay"},
    "pay": {"type": "TASK", "handler": "demo.echo", "input": "$.steps.approve.output"}}}


def waiting(execution, attempt: int) -> bool:
    step = Step.objects.filter(execution=execution, vertex="approve").first()
    return step is not None and step.status == "WAITING" and step.attempt == attempt


def test_operator_fails_then_completes_a_waiting_approval(page, ui, operator, qcluster):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "payout", APPROVAL)
    execution = services.start_execution(workspace, workflow="payout", input={"amount": 120},
                                         created_by="test").execution
    qcluster(workers=1)
    wait_for(lambda: waiting(execution, 1), timeout=60, what="the approval to wait")

    ui.log_in(operator, next_path=f"/executions/{execution.pk}/")
    step = page.locator("#step-approve")
    expect(step.locator(".outside-wait")).to_contain_text("Waiting for a callback since")
    expect(step.locator(".outside-wait")).to_contain_text("times out at")
    ui.screenshot("waits-1-waiting-for-approval")
    ui.mark_page()

    page.once("dialog", lambda dialog: dialog.accept("the amount is wrong"))
    step.get_by_role("button", name="Fail").click()
    wait_for(lambda: waiting(execution, 2), timeout=60, what="the retry to wait again")
    expect(step).to_contain_text("attempt 2 of 2", timeout=30_000)

    step.get_by_label("output of step approve").fill('{"approved_by": "ops", "amount": 120}')
    page.once("dialog", lambda dialog: dialog.accept())
    step.get_by_role("button", name="Complete").click()
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=60_000)
    ui.screenshot("waits-2-approved")
    assert ui.still_same_page()

    assert helpers.refresh(execution).output_vertex == "pay"
    audit = list(AuditEvent.objects.filter(action="step.complete").order_by("id"))
    assert [(a.outcome, a.detail["status"]) for a in audit] == [("accepted", "FAILED"), ("accepted", "SUCCEEDED")]
