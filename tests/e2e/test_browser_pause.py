"""Pause, drain and resume in a real browser (issue 31): an operator pauses a fan-out whose
calls are in flight, watches the banner go from "Paused — 3 still running" to "Paused —
drained" as the calls finish (live, no reload), edits the fan-out while it is paused, and
resumes it to success."""

import pytest
from playwright.sync_api import expect

from executions.models import Destination, Execution, FanOut, Step
from tests.support import factories, helpers
from tests.support.cluster import wait_for
from workflows.models import AuditEvent

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(240)]

CALL = {"start": "call", "vertices": {
    "call": {"type": "HTTP", "destination": "slow-api", "method": "POST", "path": "/hold", "body": "$.input",
             "timeoutSeconds": 120, "next": "done"},
    "done": {"type": "SUCCEED"},
}}
ITEMS = 3


def test_operator_pauses_watches_it_drain_edits_the_fan_out_and_resumes(page, ui, operator, qcluster, gate):
    workspace = factories.default_workspace()
    Destination.objects.create(workspace=workspace, name="slow-api", base_url=gate.url, timeout_seconds=100)
    helpers.publish(workspace, "call-slow", CALL)
    helpers.publish(workspace, "fan-slow", helpers.fanout_doc("call-slow", merge_config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}))
    parent = helpers.start(workspace, "fan-slow", {"items": [{"i": i} for i in range(ITEMS)]})
    qcluster(workers=2)
    wait_for(lambda: gate.in_flight == ITEMS, timeout=60, what="every call in flight")

    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    ui.mark_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#pause-execution").click()
    banner = page.locator("#pause-banner")
    expect(banner).to_contain_text(f"Paused — {ITEMS} still running")
    ui.screenshot("pause-1-still-running")

    gate.open()
    expect(banner).to_contain_text("Paused — drained", timeout=30_000)
    ui.screenshot("pause-2-drained")
    # The calls committed; each child's next step (SUCCEED) waits, unclaimed, for the resume.
    assert helpers.step(parent, "join").status == "WAITING" and helpers.refresh(parent).status == "RUNNING"
    assert set(Step.objects.filter(execution__parent=parent, vertex="done").values_list("status", flat=True)) == {
        "READY"}

    edit = page.locator("#fanout-edit-fan")
    edit.locator("summary").click()
    edit.locator("input[name=max_failures]").fill("1")
    edit.get_by_role("button", name="Apply").click()
    expect(page.locator("#fanout-edits-fan")).to_contain_text("edited by user:oper at")
    expect(page.locator("#fanout-edits-fan")).to_contain_text("maxFailures none → 1")
    assert FanOut.objects.get(execution=parent).max_failures == 1

    page.locator("#resume-execution").click()
    expect(banner).to_have_count(0, timeout=30_000)
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=60_000)
    ui.screenshot("pause-3-resumed")
    assert ui.still_same_page()
    assert Execution.objects.get(pk=parent.pk).version_id == parent.version_id
    actions = list(AuditEvent.objects.filter(action__in=["execution.pause", "execution.resume", "fanout.edit"])
                   .order_by("id").values_list("action", "outcome", "actor"))
    assert actions == [("execution.pause", "accepted", "user:oper"), ("fanout.edit", "accepted", "user:oper"),
                       ("execution.resume", "accepted", "user:oper")]
