"""The Schedules page in a real browser: the list with each schedule's next run, a fire that
shows up as the last run without a reload, and its link to the execution."""

import re

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Schedule
from executions.services import schedules
from tests.support import factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(120)]


def test_the_schedules_page_lists_next_and_last_runs(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedules.create_schedule(workspace, name="nightly", workflow="hello", cron="0 2 * * *",
                              timezone="Europe/Berlin", catch_up=True)
    paused = schedules.create_schedule(workspace, name="quarterly", workflow="hello", cron="0 0 1 */3 *")
    schedules.update_schedule(paused, enabled=False)
    nightly = Schedule.objects.get(name="nightly")

    ui.log_in(operator)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedules").click()
    expect(page.get_by_role("heading", name="Schedules")).to_be_visible()
    row = page.locator("#schedules tr[data-schedule='nightly']")
    expect(row).to_contain_text("0 2 * * *")
    expect(row).to_contain_text("Europe/Berlin")
    expect(row.locator(".next-run")).to_have_text(nightly.next_run_at.strftime("%Y-%m-%d %H:%M"))
    expect(row.locator(".last-run")).to_have_text("never")
    expect(page.locator("#schedules tr[data-schedule='quarterly'] .enabled")).to_have_text("paused")
    ui.mark_page()

    # The fire time comes (a fake clock for the firing): the table refreshes itself.
    assert schedules.fire_due(now=nightly.next_run_at) == 1
    execution = Execution.objects.get(created_by="schedule:nightly")
    link = row.locator(".last-run a")
    expect(link).to_have_text(nightly.next_run_at.strftime("%Y-%m-%d %H:%M"), timeout=30_000)
    assert ui.still_same_page()
    ui.screenshot("schedules-1-fired")
    link.click()
    expect(page).to_have_url(re.compile(f"/executions/{execution.pk}/"))
    expect(page.get_by_text("schedule:nightly:", exact=False).first).to_be_visible()
