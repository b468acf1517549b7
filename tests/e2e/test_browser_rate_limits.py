"""The Rate Limits page in a real browser: an operator creates a destination, watches its
in-flight count hold at the limit while a real qcluster runs a fan-out against it, raises
the limit inline, and sees the new value and the in-flight count follow — without a reload."""

import pytest
from playwright.sync_api import expect

from executions.models import Destination, Execution
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
ITEMS = 8


def cell(page, destination, column):
    return page.locator(f"#destination-{destination.pk}-{column}")


def test_operator_raises_a_limit_and_watches_in_flight_follow(page, ui, operator, qcluster, gate):
    workspace = factories.default_workspace()
    ui.log_in(operator, next_path="/rate-limits/")
    ui.mark_page()

    form = page.locator("#destination-create")
    form.get_by_label("Name").fill("slow-api")
    form.get_by_label("Base URL").fill(gate.url)
    form.get_by_label("Timeout (s)").fill("100")
    form.get_by_label("Concurrency limit").fill("2")
    form.get_by_role("button", name="Create destination").click()
    row = page.locator("#destinations tr[data-name='slow-api']")
    expect(row.locator(".limit-value")).to_have_text("2")
    destination = Destination.objects.get(workspace=workspace, name="slow-api")

    helpers.publish(workspace, "call-slow", CALL)
    helpers.publish(workspace, "fan-slow", helpers.fanout_doc("call-slow"))
    execution = helpers.start(workspace, "fan-slow", {"items": [{"i": i} for i in range(ITEMS)]})
    qcluster(workers=2)

    # Live counts: the limit holds two calls in flight, the other six wait for a slot.
    expect(cell(page, destination, "in-flight")).to_have_text("2", timeout=60_000)
    expect(cell(page, destination, "waiting")).to_have_text(str(ITEMS - 2), timeout=30_000)
    ui.screenshot("rate-limits-1-saturated")

    # A bad limit is refused inline with a precise message; nothing changes.
    row.get_by_role("button", name="Edit the limit of slow-api").click()
    limit_input = row.get_by_label("Concurrency limit of slow-api")
    limit_input.fill("five")
    row.get_by_role("button", name="Save").click()
    expect(row.locator(".field-error")).to_contain_text("whole number")
    assert Destination.objects.get(pk=destination.pk).concurrency_limit == 2

    limit_input.fill("5")
    row.get_by_role("button", name="Save").click()
    expect(row.locator(".limit-value")).to_have_text("5")
    expect(cell(page, destination, "in-flight")).to_have_text("5", timeout=30_000)
    expect(cell(page, destination, "waiting")).to_have_text(str(ITEMS - 5))
    ui.screenshot("rate-limits-2-raised")
    assert gate.peak <= 5

    gate.open()
    expect(cell(page, destination, "in-flight")).to_have_text("0", timeout=60_000)
    expect(cell(page, destination, "waiting")).to_have_text("0")
    wait_for(lambda: Execution.objects.get(pk=execution.pk).status == "SUCCEEDED", timeout=60, what="the fan-out")
    ui.screenshot("rate-limits-3-drained")
    assert ui.still_same_page()

    assert Destination.objects.get(pk=destination.pk).concurrency_limit == 5
    changes = list(AuditEvent.objects.filter(action="destination.update").order_by("id"))
    assert [(c.outcome, c.detail.get("old"), c.detail.get("new")) for c in changes] == [
        ("refused", 2, None), ("accepted", 2, 5)]
    assert all(c.actor == "user:oper" for c in changes)
    assert AuditEvent.objects.filter(action="destination.create", outcome="accepted",
                                     target="destination:slow-api").exists()

