"""Issue 30: an execution's priority (1 first to 5, default 3) — given at start by the API,
sb_run and schedules, inherited by every descendant, changed on a running tree by PATCH
(audited), shown by the API; bad values are a 400 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from executions.models import Execution, Schedule, Step
from executions.services import schedules
from tests.support import helpers
from tests.support.claims import last_audit
from tests.support.clients import api, client_for, ok, problem, text
from workflows.models import AuditEvent, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(workspace: Any) -> Any:
    """A fan-out workflow ``parent`` over ``child`` (a no-op)."""
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    return workspace


def test_the_api_starts_at_a_priority_that_the_whole_tree_shares(tree: Any) -> None:
    client = api(tree, "operator")
    created = ok(client.post("/api/v1/executions", {"workflow": "parent", "priority": 1,
                                                    "input": {"items": [{"i": 1}, {"i": 2}]}}, format="json"), 201)
    assert created["priority"] == 1
    helpers.run_engine()
    children = Execution.objects.filter(root_id=created["id"]).exclude(pk=created["id"])
    assert children.count() == 2 and set(children.values_list("priority", flat=True)) == {1}
    assert set(Step.objects.filter(root_id=created["id"]).values_list("priority", flat=True)) == {1}
    default = ok(client.post("/api/v1/executions", {"workflow": "child"}, format="json"), 201)
    assert default["priority"] == 3
    assert ok(client.get(f"/api/v1/executions/{default['id']}"))["priority"] == 3


@pytest.mark.parametrize("value", [0, 6, "high", 2.5, None, True])
def test_a_bad_priority_is_a_400_naming_the_field(tree: Any, value: Any) -> None:
    client = api(tree, "operator")
    result = problem(client.post("/api/v1/executions", {"workflow": "child", "priority": value}, format="json"), 400)
    assert {error.get("field") for error in result["errors"]} == {"priority"}, result
    assert not Execution.objects.exists()


def test_patch_changes_the_priority_of_a_running_tree_and_is_audited(tree: Any) -> None:
    client = api(tree, "operator")
    root = helpers.start(tree, "parent", {"items": [{"i": 1}, {"i": 2}, {"i": 3}]})
    [spawner] = helpers.claim_runs(1)  # the spawner RUNNING: the tree is running
    assert spawner.execution.id == root.id
    changed = ok(client.patch(f"/api/v1/executions/{root.pk}", {"priority": 1}, format="json"))
    assert changed["priority"] == 1
    assert set(Step.objects.filter(root_id=root.pk).values_list("priority", flat=True)) == {1}
    audit = last_audit("execution.priority")
    assert audit.outcome == AuditEvent.Outcome.ACCEPTED and audit.detail == {"priority": 1}
    assert audit.target == str(root.pk)


def test_patch_of_a_child_changes_its_whole_tree(tree: Any) -> None:
    client = api(tree, "operator")
    root = helpers.start(tree, "parent", {"items": [{"i": 1}, {"i": 2}]})
    helpers.run_engine()
    child = Execution.objects.filter(parent=root).first()
    assert child is not None
    ok(client.patch(f"/api/v1/executions/{child.pk}", {"priority": 5}, format="json"))
    assert set(Execution.objects.filter(root_id=root.pk).values_list("priority", flat=True)) == {5}


@pytest.mark.parametrize(("body", "field"), [({"priority": 9}, "priority"), ({}, "priority"),
                                             ({"priority": "1"}, "priority"), ({"status": "x"}, "status")])
def test_a_bad_patch_is_a_400_naming_the_field(tree: Any, body: dict[str, Any], field: str) -> None:
    root = helpers.start(tree, "child", {})
    result = problem(api(tree, "operator").patch(f"/api/v1/executions/{root.pk}", body, format="json"), 400)
    assert field in {error.get("field") for error in result["errors"]}, result
    assert helpers.refresh(root).priority == 3


def test_patch_needs_the_operator_role(tree: Any) -> None:
    root = helpers.start(tree, "child", {})
    problem(api(tree, "viewer").patch(f"/api/v1/executions/{root.pk}", {"priority": 1}, format="json"), 403)
    assert helpers.refresh(root).priority == 3


def test_sb_run_starts_at_a_priority(tree: Any) -> None:
    call_command("sb_run", "child", "--priority", "2")
    assert Execution.objects.get().priority == 2


def test_a_schedule_starts_its_executions_at_its_priority(tree: Any) -> None:
    client = api(tree, "author")
    body = {"name": "nightly", "workflow": "child", "cron": "0 2 * * *", "priority": 4}
    assert ok(client.post("/api/v1/schedules", body, format="json"), 201)["priority"] == 4
    schedule = Schedule.objects.get()
    assert schedules.fire_due(now=schedule.next_run_at) == 1
    assert Execution.objects.get().priority == 4
    assert ok(client.patch("/api/v1/schedules/nightly", {"priority": 1}, format="json"))["priority"] == 1


@pytest.mark.parametrize("value", [0, 6, "1", None])
def test_a_schedule_with_a_bad_priority_is_a_400_naming_it(tree: Any, value: Any) -> None:
    body = {"name": "nightly", "workflow": "child", "cron": "0 2 * * *", "priority": value}
    result = problem(api(tree, "author").post("/api/v1/schedules", body, format="json"), 400)
    assert {error.get("field") for error in result["errors"]} == {"priority"}, result
    assert not Schedule.objects.exists()


def test_the_start_form_takes_a_priority_and_the_execution_view_shows_it(tree: Any) -> None:
    start = reverse("ui:workflow-start", args=["child"])
    operator = client_for(tree, Role.OPERATOR, "oper")
    assert 'name="priority"' in text(operator.get(reverse("ui:workflow-detail", args=["child"])))
    bad = operator.post(start, {"input": "{}", "priority": "9"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and "priority" in bad.content.decode()
    assert not Execution.objects.exists()
    assert operator.post(start, {"input": "{}", "priority": "2"}, HTTP_HX_REQUEST="true").status_code == 200
    execution = Execution.objects.get()
    assert execution.priority == 2
    page = text(operator.get(reverse("ui:execution-detail", args=[execution.pk])))
    assert "<dd data-priority>2</dd>" in page


def test_the_execution_views_control_changes_the_trees_priority_audited(tree: Any) -> None:
    """The header's control (operator role, CSRF-checked POST, the service the PATCH calls)."""
    root = helpers.start(tree, "parent", {"items": [{"i": 1}, {"i": 2}]})
    helpers.claim_runs(1)  # the spawner RUNNING: the tree is running
    url = reverse("ui:execution-priority", args=[root.pk])
    operator = client_for(tree, Role.OPERATOR, "oper")
    page = text(operator.get(reverse("ui:execution-detail", args=[root.pk])))
    assert f'hx-post="{url}"' in page and 'aria-label="New priority"' in page
    bad = operator.post(url, {"priority": "0"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and "priority" in bad.content.decode()
    assert helpers.refresh(root).priority == 3
    viewer = client_for(tree, Role.VIEWER, "view")
    assert 'aria-label="New priority"' not in text(viewer.get(reverse("ui:execution-detail", args=[root.pk])))
    assert viewer.post(url, {"priority": "1"}, HTTP_HX_REQUEST="true").status_code == 403
    refused = last_audit("execution.priority")
    assert refused.outcome == AuditEvent.Outcome.REFUSED and helpers.refresh(root).priority == 3
    done = operator.post(url, {"priority": "1"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 200 and "set to 1 (was 3)" in done.content.decode()
    assert set(Step.objects.filter(root_id=root.pk).values_list("priority", flat=True)) == {1}
    audit = last_audit("execution.priority")
    assert audit.outcome == AuditEvent.Outcome.ACCEPTED and audit.detail == {"priority": 1, "was": 3}
    assert audit.target == str(root.pk)


def test_an_integral_json_number_is_a_priority_as_json_schema_says(tree: Any) -> None:
    """``2.0`` is an integer in JSON Schema (the API's schema says integer): accepted as 2,
    for a start and for a schedule alike (found by the live contract test)."""
    client = api(tree, "operator")
    started = ok(client.post("/api/v1/executions", {"workflow": "child", "priority": 2.0}, format="json"), 201)
    assert started["priority"] == 2
    from executions.services import schedules
    schedule = schedules.create_schedule(tree, name="n", workflow="child", cron="0 2 * * *", priority=4.0)
    assert schedule.priority == 4
