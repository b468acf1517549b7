"""Issue 33 §4, the Schedules page: an operator pauses, resumes and runs a schedule now (the
schedule services, audited), each schedule's cron is said in words, and its next run is shown
in the schedule's own time zone too. A viewer gets no buttons, and the server refuses a viewer's
POST all the same."""

import re
import zoneinfo

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Schedule
from executions.services import schedules
from tests.support import factories, helpers
from workflows.models import AuditEvent, Role

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(120)]
PASSWORD = "operator-password-for-tests"  # the browser fixtures' (tests/support/browser.py)


def test_an_operator_pauses_resumes_and_runs_a_schedule_now(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedules.create_schedule(workspace, name="often", workflow="hello", cron="*/5 * * * *", input={"n": 1})
    schedules.create_schedule(workspace, name="nightly", workflow="hello", cron="0 2 * * *",
                              timezone="Europe/Berlin")
    nightly = Schedule.objects.get(name="nightly")

    ui.log_in(operator, next_path="/schedules/")
    often = page.locator("#schedules tr[data-schedule='often']")
    expect(often.locator(".cron-words")).to_have_text("Every 5 minutes")
    row = page.locator("#schedules tr[data-schedule='nightly']")
    expect(row.locator(".cron-words")).to_have_text("At 02:00")
    local = nightly.next_run_at.astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))
    expect(row.locator(".zone-time")).to_have_text(local.strftime("%Y-%m-%d %H:%M %Z"))
    assert local.strftime("%H:%M") == "02:00"
    ui.mark_page()

    often.get_by_role("button", name="Pause schedule often").click()
    expect(often.locator(".enabled")).to_have_text("paused")
    expect(page.locator("#flash")).to_contain_text("Paused schedule 'often'")
    assert not Schedule.objects.get(name="often").enabled
    often.get_by_role("button", name="Resume schedule often").click()
    expect(often.locator(".enabled")).to_have_text("yes")
    assert Schedule.objects.get(name="often").next_run_at is not None

    page.once("dialog", lambda dialog: dialog.accept())
    often.get_by_role("button", name="Run schedule often now").click()
    expect(page.locator("#flash")).to_contain_text("Started hello now for schedule 'often'")
    started = Execution.objects.get(created_by__startswith="schedule:often")
    assert started.created_by == "schedule:often (run now by user:oper)"
    expect(often.locator(".last-run a")).to_have_attribute("href", f"/executions/{started.pk}/")
    assert ui.still_same_page()
    ui.screenshot("schedules-2-actions")
    actions = list(AuditEvent.objects.filter(action__startswith="schedule.").order_by("id")
                   .values_list("action", "target", "outcome"))
    ok = AuditEvent.Outcome.ACCEPTED
    assert actions == [("schedule.pause", "often", ok), ("schedule.resume", "often", ok),
                       ("schedule.run-now", "often", ok)]


def test_a_viewer_gets_no_buttons_and_is_refused(page, ui, transactional_db):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedules.create_schedule(workspace, name="often", workflow="hello", cron="*/5 * * * *")
    viewer = factories.member(workspace, Role.VIEWER, "viewer", password=PASSWORD)
    ui.log_in(viewer, next_path="/schedules/")
    row = page.locator("#schedules tr[data-schedule='often']")
    expect(row.locator(".cron-words")).to_have_text("Every 5 minutes")
    expect(row.get_by_role("button")).to_have_count(0)
    token = page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']")
    answer = page.request.post("/schedules/often/pause", headers={"X-CSRFToken": token})
    assert answer.status == 403
    assert re.search(r"operator", answer.text())
    assert Schedule.objects.get(name="often").enabled
    assert AuditEvent.objects.get(action="schedule.pause").outcome == AuditEvent.Outcome.REFUSED
