"""The demo that ``make run`` starts — the ledger migration of 1,000 entries — on a real
qcluster, seen in the execution view: the ledger's outage refuses ~3% of the entries, the
merge tolerates 5%, so the migration succeeds and the view says exactly which entries
failed and why. Its screenshot is the README's (``SB_UPDATE_DOCS_IMAGES=1`` refreshes
``docs/images/execution-view.png``)."""

import os
import re
import shutil

import pytest
from playwright.sync_api import expect

from demo import ledger
from demo import workflows as demo_workflows
from executions.services import lifecycle as services
from tests.support import ROOT, factories, helpers
from tests.support.cluster import wait_for

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]

DOCS_IMAGE = ROOT / "docs" / "images" / "execution-view.png"


def test_the_demo_ledger_migration_in_the_execution_view(page, ui, operator, qcluster, live_server):
    workspace = factories.default_workspace()
    demo_workflows.load(workspace, base_url=live_server.url)
    entries = demo_workflows.ledger_entries(1000)
    refused = sum(ledger.refuses(entry["id"]) for entry in entries)
    execution = services.start_execution(workspace, workflow="ledger-migration", input={"entries": entries},
                                         idempotency_key="demo-ledger-migration", created_by="demo").execution
    qcluster(workers=2)
    wait_for(lambda: helpers.refresh(execution).is_terminal, timeout=240, what="the demo migration to finish")
    assert helpers.refresh(execution).status == "SUCCEEDED"
    assert helpers.child_counts(execution) == {"SUCCEEDED": 1000 - refused, "FAILED": refused}

    ui.log_in(operator, next_path=f"/executions/{execution.pk}/")
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED")
    expect(page.locator("#verdict-fanout")).to_have_text(
        f"{refused} failed of 1,000; tolerance 5% allows 50; failFast off")
    expect(page.locator(".fanout [data-count='SUCCEEDED']")).to_have_text(f"{1000 - refused:,}")
    expect(page.locator("#tail-p99")).not_to_be_empty()
    page.locator(".fanout a:has([data-count='FAILED'])").click()  # the failed entries, with their errors
    expect(page.locator("#children-fanout")).to_have_attribute("data-status-filter", "FAILED")
    expect(page.locator("#children-fanout tbody tr")).to_have_count(refused)
    # The rows' shared error prefix is stated once above the table (issue 33 §3); each row keeps
    # its whole error in its title.
    expect(page.locator("#shared-error-fanout")).to_contain_text("HTTP 503")
    expect(page.locator("#children-fanout tbody tr td.err").first).to_have_attribute("title", re.compile("HTTP 503"))
    page.set_viewport_size({"width": 1360, "height": 1500})
    page.evaluate("window.scrollTo(0, 0)")
    path = ui.screenshot("demo-ledger-migration", full_page=False)
    if os.environ.get("SB_UPDATE_DOCS_IMAGES"):
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGE)
