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


TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}


def test_retried_tolerated_failures_update_the_output_durations_and_cards(page, ui, operator):
    """A merge that succeeded with 2 tolerated failures: "Retry all failed" re-runs them, the
    parent's Output then counts them as succeeded, and the retried children show their last
    attempt's duration with the total of their attempts."""
    import re

    from django.db import connection

    from tests.support import handlers

    workspace = factories.default_workspace()
    handlers.set_flaky(True)
    parent = helpers.run_fanout(workspace, 6, failing={1, 4}, child=helpers.FLAKY, merge_config=TOLERANT)
    assert parent.status == "SUCCEEDED"
    with connection.cursor() as cursor:  # the failures happened 20 minutes ago
        cursor.execute("UPDATE executions_execution SET started_at = started_at - interval '20 minutes', "
                       "attempt_started_at = attempt_started_at - interval '20 minutes' "
                       "WHERE parent_id = %s AND status = 'FAILED'", [parent.pk])
    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    expect(page.locator("#execution-output pre")).to_contain_text('"FAILED": 2')
    ui.mark_page()

    handlers.set_flaky(False)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile(r"Retry all failed \(2\)")).click()
    expect(page.locator(".fanout [data-count='FAILED']")).to_have_text("0", timeout=20_000)  # re-run
    helpers.run_engine()
    expect(page.locator(".fanout [data-count='SUCCEEDED']")).to_have_text("6", timeout=20_000)
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED")  # a succeeded merge is not re-opened
    expect(page.locator("#execution-output pre")).to_contain_text('"FAILED": 0', timeout=20_000)
    duration = page.locator("#child-fan-1 td").nth(4)  # #, item, status, attempt, duration
    expect(duration).to_contain_text("in all, 2 attempts)")
    expect(duration).not_to_contain_text("min (")  # the last attempt took milliseconds, not 20 minutes
    ui.screenshot("live-structure-2-retried-output")
    assert ui.still_same_page()
