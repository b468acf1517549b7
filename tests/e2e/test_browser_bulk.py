"""Bulk actions and error groups in a real browser, on a real qcluster (issue 31 §5, issue 33
§3): the execution view groups the failed children by error signature ("30 × … HTTP 503 …");
"Retry this group" starts a bulk retry of exactly that group, whose progress the panel shows
until it is done; the filter form retries the children whose error contains "409"."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from executions.models import BulkOperation, Execution
from tests.support import factories, helpers
from tests.support.cluster import wait_for

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]


def error(i: int) -> str:
    if i % 4 == 1:
        return f"POST http://127.0.0.1:8001/ledger/entries/e-{48000 + i} returned HTTP 503: ledger unavailable"
    if i % 10 == 3:
        return f"POST http://127.0.0.1:8001/ledger/entries/e-{48000 + i} returned HTTP 409: conflict on 'acct-{i}'"
    return ""


def test_operator_retries_an_error_group_and_a_filtered_set(page: Any, ui: Any, operator: Any, qcluster: Any) -> None:
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "fail": bool(error(i)), "message": error(i)} for i in range(120)]
    execution = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine(max_seconds=60)
    assert helpers.refresh(execution).status == "FAILED"
    qcluster(workers=2, SB_BULK_BATCH="4")

    ui.log_in(operator, next_path=f"/executions/{execution.pk}/")
    groups = page.locator("#error-groups tbody tr")
    expect(groups).to_have_count(2)
    expect(groups.nth(0).locator("[data-group-count]")).to_have_text("30")
    expect(groups.nth(0).locator("[data-signature]")).to_contain_text("returned HTTP 503: ledger unavailable")
    expect(groups.nth(1).locator("[data-group-count]")).to_have_text("6")
    expect(groups.nth(1).locator("[data-signature]")).to_contain_text("HTTP 409: conflict on '…'")
    shots = ui.screenshot("bulk-error-groups").parent
    page.locator("section.bulk").screenshot(path=str(shots / "bulk-error-groups-panel.png"))

    page.once("dialog", lambda dialog: dialog.accept())
    groups.nth(0).get_by_role("button", name=re.compile("Retry this group")).click()
    expect(page.locator("#flash")).to_contain_text("Bulk retry started: 30 matching children")
    operation = page.locator("#bulk-operations li").first
    expect(operation).to_have_attribute("data-state", "succeeded", timeout=60_000)
    expect(operation.locator("[data-done]")).to_have_text("30")
    expect(operation.locator("[data-matched]")).to_have_text("30")
    shots = ui.screenshot("bulk-group-retried").parent
    page.locator("section.bulk").screenshot(path=str(shots / "bulk-group-retried-panel.png"))
    retried = Execution.objects.filter(parent=execution, attempt=2)
    assert sorted(retried.values_list("item_index", flat=True)) == [i for i in range(120) if i % 4 == 1]

    form = page.locator("#bulk-form")
    form.locator("select[name=status]").select_option("FAILED")
    form.locator("input[name=error_contains]").fill("409")
    form.get_by_role("button", name="Retry matching").click()
    expect(page.locator("#flash")).to_contain_text("Bulk retry started: 6 matching children")
    latest = page.locator("#bulk-operations li").first
    expect(latest).to_have_attribute("data-state", "succeeded", timeout=60_000)
    expect(latest.locator("[data-done]")).to_have_text("6")
    shots = ui.screenshot("bulk-filtered-retried").parent
    page.locator("section.bulk").screenshot(path=str(shots / "bulk-filtered-retried-panel.png"))
    wait_for(lambda: BulkOperation.objects.filter(state="succeeded").count() == 2, timeout=10, what="both operations")
    assert Execution.objects.filter(parent=execution, attempt=2).count() == 36
