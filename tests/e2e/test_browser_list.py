"""Issue 33 §4, the execution list: each parent's fan-out health (a mini bar and counts from the
fan-out counters, "2 failed (tolerated)"), rows that refresh while unfinished, a total count,
relative times with the absolute time in a title, and the filters and page in the URL."""

import re

import pytest
from playwright.sync_api import expect

from tests.support import factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(180)]

TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.1}}


def test_each_parent_shows_its_fan_out_health_and_unfinished_rows_refresh(page, ui, operator):
    workspace = factories.default_workspace()
    done = helpers.run_fanout(workspace, 20, failing={3, 7}, merge_config=TOLERANT)
    assert done.status == "SUCCEEDED"
    waiting = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": False} for i in range(5)]})

    ui.log_in(operator)
    expect(page.locator("#execution-total")).to_have_text(re.compile(r"^2 executions"))
    row = page.locator(f"#executions tr[data-execution='{done.pk}']")
    expect(row.locator(".health-words")).to_have_text("18 succeeded · 2 failed (tolerated)")
    expect(row.locator(".mini-bar .seg")).to_have_count(2)
    expect(row.locator(".mini-bar")).to_have_attribute("aria-label", "20 children: 18 succeeded, 2 failed (tolerated)")
    created = row.locator("time")
    expect(created).to_have_text(re.compile(r"^(just now|\d+ min ago)$"))
    expect(created).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    expect(created).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(row.get_by_role("link", name=f"Open execution {str(done.pk)[:8]}")).to_be_visible()
    pending = page.locator(f"#executions tr[data-execution='{waiting.pk}']")
    expect(pending).to_have_attribute("data-status", "PENDING")
    expect(page.locator("#execution-rows")).to_have_attribute("data-live", "yes")
    ui.mark_page()
    ui.screenshot("list-1-health")

    helpers.run_engine()  # the second parent runs its 5 children and succeeds
    expect(pending).to_have_attribute("data-status", "SUCCEEDED", timeout=20_000)
    expect(pending.locator(".health-words")).to_have_text("5 succeeded")
    expect(page.locator("#execution-rows")).to_have_attribute("data-live", "no")
    assert ui.still_same_page()


def test_the_filters_and_the_page_live_in_the_url(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", helpers.NOOP)
    for _ in range(55):
        helpers.start(workspace, "hello", {})
    ui.log_in(operator)
    page.get_by_label("Status").select_option("PENDING")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"status=PENDING"))
    expect(page.locator("#execution-total")).to_have_text("55 executions · page 1")
    page.get_by_role("link", name="Older →").click()
    expect(page).to_have_url(re.compile(r"status=PENDING.*page=2"))
    expect(page.locator("#executions tbody tr")).to_have_count(5)
    shared = page.url
    page.goto("/workflows/")
    page.goto(shared)  # a shared (or reloaded) link shows the same view
    expect(page.get_by_label("Status")).to_have_value("PENDING")
    expect(page.locator("#execution-total")).to_have_text("55 executions · page 2")
    expect(page.locator("#executions tbody tr")).to_have_count(5)


def test_the_children_tables_filter_sort_and_page_live_in_the_url(page, ui, operator):
    workspace = factories.default_workspace()
    parent = helpers.run_fanout(workspace, 120, failing=set(range(0, 120, 2)), merge_config=TOLERANT)
    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    table = page.locator("#children-fan")
    ui.mark_page()
    table.get_by_role("navigation", name="Filter by status").get_by_role("link", name="failed").click()
    expect(table).to_have_attribute("data-status-filter", "FAILED")
    expect(page).to_have_url(re.compile(r"\?fanout=fan&status=FAILED$"))
    table.get_by_role("link", name="Next ›").click()
    expect(table.locator("tbody tr")).to_have_count(10)
    expect(page).to_have_url(re.compile(r"\?fanout=fan&status=FAILED&page=2$"))
    assert ui.still_same_page()  # htmx swapped the table and pushed the address

    page.reload()
    expect(table).to_have_attribute("data-status-filter", "FAILED")
    expect(table.locator("tbody tr")).to_have_count(10)
    expect(table.locator(".pager")).to_contain_text("Page 2 of 2")
    first = table.locator("tbody tr").first
    expect(first).to_have_attribute("data-index", "100")

    page.go_back()  # the history follows the table too
    expect(page).to_have_url(re.compile(r"\?fanout=fan&status=FAILED$"))
    expect(table.locator(".pager")).to_contain_text("Page 1 of 2")

    page.goto(f"/executions/{parent.pk}/?fanout=fan&sort=duration")  # a shared link
    expect(table).to_have_attribute("data-sort", "duration")
    page.goto(f"/executions/{parent.pk}/?fanout=fan&status=NOPE")  # a bad address: the default view
    expect(table).to_have_attribute("data-status-filter", "")
