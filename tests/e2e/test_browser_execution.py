"""The seed article's recovery story in a real browser, on a real qcluster: the demo ledger
migration fails on its merge because the ledger refuses some entries; the operator sees
exactly which, brings the ledger back, retries one child and watches it and the counters
change, then retries all failed children and watches the parent succeed through the
merge redrive — a few clicks, no reload, no forensic project."""

import re

import pytest
from playwright.sync_api import expect

from demo import ledger
from demo import workflows as demo_workflows
from executions.models import Execution
from executions.services import lifecycle as services
from tests.support import factories, helpers
from tests.support.cluster import wait_for
from workflows.models import AuditEvent

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]

REFUSED, ACCEPTED = 10, 90  # 10% refused: more than the merge's 5% tolerance


def entries() -> list[dict]:
    """Demo ledger entries picked so the outage refuses every tenth (items 5, 15, … 95)."""
    pool = demo_workflows.ledger_entries(2000)
    refused = [e for e in pool if ledger.refuses(e["id"])][:REFUSED]
    accepted = [e for e in pool if not ledger.refuses(e["id"])][:ACCEPTED]
    return [refused.pop(0) if i % 10 == 5 else accepted.pop(0) for i in range(REFUSED + ACCEPTED)]


def settled(execution: Execution) -> bool:
    """The parent finished and no child is still pending or running."""
    current = helpers.refresh(execution)
    counts = helpers.child_counts(execution)
    return current.is_terminal and not counts.get("PENDING") and not counts.get("RUNNING")


def count(page, status):
    return page.locator(f".fanout [data-count='{status}']")


def test_operator_repairs_a_failed_ledger_migration(page, ui, operator, qcluster, live_server):
    workspace = factories.default_workspace()
    demo_workflows.load(workspace, base_url=live_server.url)
    execution = services.start_execution(workspace, workflow="ledger-migration", input={"entries": entries()},
                                         created_by="test").execution
    qcluster(workers=2)
    wait_for(lambda: settled(execution), timeout=120, what="the migration to finish")
    assert helpers.refresh(execution).status == "FAILED"
    in_db = helpers.child_counts(execution)
    assert in_db == {"SUCCEEDED": ACCEPTED, "FAILED": REFUSED}

    # The execution view shows what the database says.
    ui.log_in(operator, next_path=f"/executions/{execution.pk}/")
    expect(page.locator("#execution-status")).to_have_text("FAILED")
    expect(count(page, "SUCCEEDED")).to_have_text(str(in_db["SUCCEEDED"]))
    expect(count(page, "FAILED")).to_have_text(str(in_db["FAILED"]))
    for status in ("PENDING", "RUNNING", "CANCELLED", "NEVER_STARTED"):
        expect(count(page, status)).to_have_text("0")
    expect(page.locator("#verdict-fanout")).to_have_text(
        "10 failed of 100; tolerance 5% allows 5; failFast off")
    expect(page.locator("#merge-status-fanout")).to_have_text("FAILED")
    ui.screenshot("execution-1-merge-failed")

    # The ledger is back (the operator flips the demo's outage off on the Rate Limits page).
    page.get_by_role("link", name="Rate Limits").click()
    page.get_by_role("button", name="Mark the ledger healthy").click()
    expect(page.locator("#demo-switch [data-healthy]")).to_have_text("healthy")
    page.go_back()
    expect(page.locator("#execution-status")).to_have_text("FAILED")
    ui.mark_page()

    # Retry one failed child from the children table; watch it and the counters update.
    failed_row = page.locator("#children-fanout tr[data-status='FAILED']").first
    index = failed_row.get_attribute("data-index")
    failed_row.get_by_role("button", name="Retry").click()
    expect(page.locator(f"#child-fanout-{index}")).to_have_attribute("data-status", "SUCCEEDED", timeout=60_000)
    expect(count(page, "FAILED")).to_have_text(str(REFUSED - 1), timeout=30_000)
    expect(count(page, "SUCCEEDED")).to_have_text(str(ACCEPTED + 1))
    expect(page.locator(f"#child-fanout-{index} td").nth(3)).to_have_text("2")  # the operator's retry (attempt)
    ui.screenshot("execution-2-one-child-retried")
    wait_for(lambda: settled(execution), timeout=60, what="the redriven merge to decide again")
    expect(page.locator("#execution-status")).to_have_text("FAILED", timeout=30_000)

    # Retry all failed (with confirmation): the merge is redriven and the parent succeeds.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile(rf"Retry all failed \({REFUSED - 1}\)")).click()
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=90_000)
    expect(count(page, "FAILED")).to_have_text("0", timeout=30_000)
    expect(count(page, "SUCCEEDED")).to_have_text(str(REFUSED + ACCEPTED))
    expect(page.locator("#merge-status-fanout")).to_have_text("SUCCEEDED")
    expect(page.locator("#execution-header")).to_have_attribute("data-live", "no", timeout=30_000)
    ui.screenshot("execution-3-all-retried-succeeded")
    assert ui.still_same_page()

    assert helpers.refresh(execution).status == "SUCCEEDED"
    assert helpers.child_counts(execution) == {"SUCCEEDED": REFUSED + ACCEPTED}
    actions = list(AuditEvent.objects.filter(actor="user:oper", outcome="accepted").values_list("action", flat=True)
                   .order_by("id"))
    assert actions == ["demo.switch", "execution.retry", "execution.retry-failed-children"]
