"""Business keys, tags and search in a real browser (issue 31 §4, issue 33 §3): an operator
starts a fan-out with tags from the start form and finds it again by tag on the execution list;
the children table names each child's item (its itemKey, or a preview of the item without
one), states the error prefix the rows share once, and finds a child by item key or by error
text; a failed child's page links the previous and next failed children; a retry with an edited
input shows what the edit changed."""

import json

import pytest
from playwright.sync_api import expect

from executions.models import Execution
from tests.support import ARTIFACTS, factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(240)]

TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 1}}


def items(n: int) -> list[dict]:
    return [{"id": f"e-{48210 + i}", "fail": i % 3 == 0,
             "message": f"ledger refused entry e-{48210 + i}: HTTP 409 duplicate"} for i in range(n)]


def publish_workflows(workspace) -> None:
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    keyed = helpers.fanout_doc("child", merge_config=TOLERANT)
    keyed["vertices"]["fan"]["itemKey"] = "$.item.id"
    helpers.publish(workspace, "keyed", keyed)
    helpers.publish(workspace, "plain", helpers.fanout_doc("child", merge_config=TOLERANT))


def test_tags_item_keys_search_failed_siblings_and_the_input_diff(page, ui, operator):
    workspace = factories.default_workspace()
    publish_workflows(workspace)
    plain = helpers.start(workspace, "plain", {"items": [{"n": i, "fail": False} for i in range(3)]},
                          tags={"customer": "zeta"})

    # Start from the form with tags; the execution opens and shows them.
    ui.log_in(operator, next_path="/workflows/keyed/")
    page.locator("#start-input").fill(json.dumps({"items": items(9)}))
    page.locator("#start-tags").fill('customer=acme region="eu west"')
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#execution-tags")).to_contain_text("customer:acme")
    parent = Execution.objects.get(workflow__key="keyed")
    assert parent.tags == {"customer": "acme", "region": "eu west"}
    helpers.run_engine()

    # The execution list finds it by its tags (all must match), and not by another's.
    page.goto("/executions/")
    page.locator("#tag-search").fill('customer:acme region:"eu west"')
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("#executions tbody tr[data-status]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("customer:acme")
    ui.screenshot("keys-1-list-by-tag")
    page.locator("#tag-search").fill("customer:acme region:us")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#executions tbody tr[data-status]")).to_have_count(0)
    page.locator("#tag-search").fill("customer")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#filter-error")).to_contain_text("not key:value")

    # The children table: each row names its item; the shared error start is said once.
    page.goto(f"/executions/{parent.pk}/")
    table = page.locator("#children-fan")
    expect(table.locator("tr[data-index='4'] .item-key")).to_have_text("e-48214")
    expect(table.locator("#shared-error-fan")).to_contain_text("ledger refused entry")
    failed_error = table.locator("tr[data-index='3'] td.err")
    expect(failed_error).to_have_text("…e-48213: HTTP 409 duplicate")
    ui.screenshot("keys-2-children-with-item-keys")
    table.screenshot(path=str(ARTIFACTS / "screenshots" / "keys-2-children-panel.png"))  # for docs/ui.md

    # Search by item key, then by error text, then clear.
    table.locator("[data-child-search='key']").fill("e-48216")
    table.get_by_role("button", name="Search").click()
    expect(page.locator("#children-fan tbody tr[data-index]")).to_have_count(1)
    expect(page.locator("#children-fan tr[data-index='6']")).to_have_attribute("data-item-key", "e-48216")
    page.locator("#children-fan [data-child-search='key']").fill("")
    page.locator("#children-fan [data-child-search='error']").fill("HTTP 409")
    page.locator("#children-fan").get_by_role("button", name="Search").click()
    expect(page.locator("#children-fan tbody tr[data-index]")).to_have_count(3)
    expect(page.locator("#children-fan tbody tr[data-status='FAILED']")).to_have_count(3)
    ui.screenshot("keys-3-children-searched-by-error")

    # Without an itemKey, a row shows the start of its item.
    page.goto(f"/executions/{plain.pk}/")
    expect(page.locator("#children-fan tr[data-index='1'] .item-preview")).to_contain_text('"n": 1')

    # A failed child's page links its failed siblings.
    third = Execution.objects.get(parent=parent, item_index=3)
    page.goto(f"/executions/{third.pk}/")
    expect(page.locator("#business-key")).to_have_text("e-48213")
    expect(page.locator("#previous-failed")).to_contain_text("#0")
    page.locator("#next-failed").click()
    expect(page.locator("#business-key")).to_have_text("e-48216")
    expect(page.locator("#previous-failed")).to_contain_text("#3")
    ui.screenshot("keys-4-failed-siblings")

    # Retry with an edited input: the header shows the change, before and after.
    page.locator("#retry-edited summary").click()
    edited = {**items(9)[6], "fail": False}
    page.locator("#retry-input").fill(json.dumps(edited))
    page.get_by_role("button", name="Retry with this input").click()
    diff = page.locator("#input-diff")
    expect(diff.locator("tr[data-path='$.fail'] .before")).to_have_text("true")
    expect(diff.locator("tr[data-path='$.fail'] .after")).to_have_text("false")
    expect(diff.locator("tbody tr")).to_have_count(1)
    ui.screenshot("keys-5-input-diff")
    helpers.run_engine()
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=15_000)
