"""Issue 33 §1: the execution view follows the run. Opened before its SPAWNER ran — the
normal path, since Start opens the new execution at once — the page grows its fan-out panel,
children table, downloads and long tail as the run creates them; a retry with an edited input
replaces the input shown and drops the edit form; all without a reload."""

import pytest
from playwright.sync_api import expect

from executions.models import Execution
from tests.support import factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(180)]


def test_a_page_opened_before_the_spawner_ran_grows_with_the_run(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "fail": i == 2} for i in range(4)]
    parent = helpers.start(workspace, "parent", {"items": items})

    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    expect(page.locator("#execution-status")).to_have_text("PENDING")
    expect(page.locator(".fanout")).to_have_count(0)
    ui.mark_page()

    helpers.run_engine()  # the spawner runs, every child ends, the merge fails on child 2
    expect(page.locator("#execution-status")).to_have_text("FAILED", timeout=20_000)
    expect(page.locator(".fanout")).to_have_count(1, timeout=20_000)
    expect(page.locator(".fanout [data-count='SUCCEEDED']")).to_have_text("3")
    expect(page.locator(".fanout [data-count='FAILED']")).to_have_text("1")
    expect(page.locator("#children-fan tr[data-status='FAILED']")).to_have_count(1)
    expect(page.locator("#children-downloads")).to_be_visible()
    expect(page.locator("#execution-long-tail")).to_be_visible()
    assert ui.still_same_page()
    ui.screenshot("live-structure-1-grown")

    # A failed child retried with an edited input from its page: the page drops the edit form
    # and shows the new input at once, then follows the child to its success.
    child = Execution.objects.get(parent=parent, item_index=2)
    page.goto(f"/executions/{child.pk}/")
    page.locator("#retry-edited summary").click()
    ui.mark_page()
    page.locator("#retry-input").fill('{"i": 2, "fail": false}')
    page.get_by_role("button", name="Retry with this input").click()
    expect(page.locator("#retry-edited")).to_have_count(0)
    expect(page.locator("#execution-input pre")).to_contain_text('"fail": false')
    helpers.run_engine()
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=20_000)
    assert ui.still_same_page()
