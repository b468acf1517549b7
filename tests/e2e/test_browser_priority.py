"""Issue 30 §3 in a real browser: an operator changes the priority of a running execution tree
from the execution view's header — the root and every descendant's open steps take it (what
the fair claim reads), the header shows it without a reload, and the change is audited; a
viewer sees the priority but no control."""

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Step
from tests.support import factories, helpers
from workflows.models import AuditEvent, Role

pytest_plugins = ["tests.support.browser"]
PASSWORD = "operator-password-for-tests"  # tests.support.browser's (imported only as a plugin)
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]


def test_operator_changes_a_running_trees_priority(page, ui, operator, live_server):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", {"start": "w", "vertices": {
        "w": {"type": "TIMER", "seconds": 3600, "next": "t"}, "t": {"type": "TASK", "handler": "demo.echo"}}})
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    root = helpers.start(workspace, "parent", {"items": [{"i": i} for i in range(3)]})
    helpers.run_engine(max_seconds=5)  # spawn the children; their timers keep the tree open
    assert not helpers.refresh(root).is_terminal
    children = Execution.objects.filter(root=root).exclude(pk=root.pk)
    assert children.count() == 3

    child = children.order_by("item_index").first()
    ui.log_in(operator, next_path=f"/executions/{child.pk}/")
    expect(page.locator("[data-priority]")).to_contain_text("3")
    ui.mark_page()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_label("New priority").select_option("1")
    page.get_by_role("button", name="Set").click()
    expect(page.locator("#flash")).to_contain_text("Priority of the tree set to 1 (was 3).")
    expect(page.locator("[data-priority]")).to_have_text("1")  # the header refreshed itself
    expect(page.get_by_label("New priority")).to_have_value("1")
    assert ui.still_same_page()
    ui.screenshot("priority-1-set")

    assert set(Execution.objects.filter(root=root).values_list("priority", flat=True)) == {1}
    open_steps = Step.objects.filter(root_id=root.pk, status__in=["READY", "RUNNING", "WAITING"])
    assert open_steps.exists() and set(open_steps.values_list("priority", flat=True)) == {1}
    event = AuditEvent.objects.filter(action="execution.priority").latest("id")
    assert event.target == str(child.pk) and event.outcome == "accepted", event
    assert event.detail == {"priority": 1, "was": 3}

    # A viewer sees the priority, not the control.
    viewer = factories.member(workspace, Role.VIEWER, "viewer", password=PASSWORD)  # the fixtures' password
    page.context.clear_cookies()
    ui.log_in(viewer, next_path=f"/executions/{root.pk}/")
    expect(page.locator("[data-priority]")).to_contain_text("1")
    expect(page.get_by_label("New priority")).to_have_count(0)
