"""S15 outside the API: the engine's own starts (CHAIN, SPAWNER) of reserved workflows, the
operator UI, and the manage.py commands — all refused through the same service rule."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from executions.models import Execution, Step
from executions.services import lifecycle as services
from tests.support import helpers
from tests.support.claims import last_audit, publish_system, start_system
from tests.support.clients import staff
from workflows.errors import PermissionDenied, ServiceError
from workflows.models import Role, WorkflowDefinition
from workflows.services import publish_version

pytestmark = pytest.mark.django_db

TARGET = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop"}}}


def chain_to(key: str) -> dict[str, Any]:
    return {"start": "c", "vertices": {"c": {"type": "CHAIN", "workflow": key, "input": {"v": 1}}}}


# --- CHAIN --------------------------------------------------------------------------------------

def test_an_ordinary_workflow_cannot_chain_into_a_system_workflow(workspace: Any) -> None:
    publish_system(workspace, "system.target", TARGET)
    helpers.publish(workspace, "sneaky", chain_to("system.target"))
    execution = helpers.start(workspace, "sneaky", {})
    helpers.run_engine()
    step = helpers.step(execution, "c")
    assert helpers.refresh(execution).status == "FAILED" and step.status == "FAILED"
    assert "CHAIN could not start 'system.target'" in step.error
    assert "a CHAIN of workflow 'sneaky' may not start 'system.target'" in step.error
    assert not Execution.objects.filter(workflow__key="system.target").exists()


def test_a_system_workflow_may_chain_into_a_system_workflow(workspace: Any) -> None:
    publish_system(workspace, "system.target", TARGET)
    publish_system(workspace, "system.starter", chain_to("system.target"))
    execution = start_system(workspace, "system.starter", {})
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    chained = Execution.objects.get(workflow__key="system.target")
    assert chained.chained_from_id == execution.pk and chained.status == "SUCCEEDED"


def test_a_system_workflow_may_continue_as_new(workspace: Any) -> None:
    doc = {"start": "route", "vertices": {
        "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.v", "equals": 1}, "next": "again"}],
                  "default": "done"},
        "again": {"type": "CHAIN", "workflow": "self", "input": {"v": 2}},
        "done": {"type": "SUCCEED"}}}
    publish_system(workspace, "system.loop", doc)
    start_system(workspace, "system.loop", {"v": 1})
    helpers.run_engine()
    assert sorted(Execution.objects.filter(workflow__key="system.loop").values_list("status", flat=True)) \
        == ["SUCCEEDED", "SUCCEEDED"]


# --- SPAWNER ------------------------------------------------------------------------------------

def test_an_ordinary_workflow_cannot_spawn_system_children(workspace: Any) -> None:
    publish_system(workspace, "system.child", TARGET)
    helpers.publish(workspace, "fan", helpers.fanout_doc("system.child"))
    parent = helpers.start(workspace, "fan", {"items": [1, 2, 3]})
    helpers.run_engine()
    step = helpers.step(parent, "fan")
    assert step.status == "FAILED"
    assert "a SPAWNER of workflow 'fan' may not start 'system.child'" in step.error
    assert not Execution.objects.filter(parent=parent).exists()


def test_an_ordinary_spawner_cannot_reach_a_system_version_by_its_hash(workspace: Any) -> None:
    version = publish_system(workspace, "system.child", TARGET)
    doc = helpers.fanout_doc("system.child")
    doc["vertices"]["fan"]["version"] = version.hash
    helpers.publish(workspace, "fan", doc)
    parent = helpers.start(workspace, "fan", {"items": [1]})
    helpers.run_engine()
    assert "may not start 'system.child'" in helpers.step(parent, "fan").error
    assert not Execution.objects.filter(parent=parent).exists()


def test_a_system_workflow_may_spawn_system_children(workspace: Any) -> None:
    publish_system(workspace, "system.child", TARGET)
    publish_system(workspace, "system.fan", helpers.fanout_doc("system.child"))
    parent = start_system(workspace, "system.fan", {"items": [1, 2, 3]})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert Execution.objects.filter(parent=parent, status="SUCCEEDED").count() == 3


def test_a_system_workflow_may_spawn_ordinary_children_of_a_pinned_version(workspace: Any) -> None:
    doc = helpers.fanout_doc("child")
    doc["vertices"]["fan"]["version"] = helpers.publish(workspace, "child", TARGET).hash
    publish_system(workspace, "system.fan", doc)
    parent = start_system(workspace, "system.fan", {"items": [1, 2]})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"


# --- the operator UI ----------------------------------------------------------------------------

@pytest.fixture
def failed_system_fanout(workspace: Any) -> tuple[Execution, Execution]:
    """A system fan-out whose only child FAILED: (parent, child)."""
    publish_system(workspace, "system.fan", helpers.fanout_doc("system.child"))
    publish_system(workspace, "system.child", helpers.FAIL_IF)
    parent = start_system(workspace, "system.fan", {"items": [{"fail": True}]})
    helpers.run_engine()
    return parent, Execution.objects.get(parent=parent)


def test_the_ui_refuses_operator_actions_on_system_executions_with_the_reason(
        workspace: Any, failed_system_fanout: tuple[Execution, Execution]) -> None:
    parent, child = failed_system_fanout
    client = staff(workspace, Role.ADMIN, "ui-admin", superuser=True)
    posts = [
        ("execution.retry", reverse("ui:execution-retry", args=[child.pk])),
        ("step.retry", reverse("ui:step-retry", args=[child.pk, "t"])),
        ("execution.cancel", reverse("ui:execution-cancel", args=[parent.pk])),
    ]
    for action, url in posts:
        response = client.post(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 403, (url, response.status_code)
        assert "reserved for system actors" in response.content.decode(), url
        refusal = last_audit(action)
        assert refusal.outcome == "refused" and refusal.actor == "user:ui-admin", action
    assert Step.objects.get(execution=child, vertex="t").status == "FAILED"
    assert helpers.refresh(parent).status == "FAILED"


# --- manage.py commands -------------------------------------------------------------------------

def test_sb_publish_refuses_a_reserved_key_and_audits_it(workspace: Any, tmp_path: Any) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(helpers.NOOP))
    with pytest.raises(CommandError, match="reserved for system actors"):
        call_command("sb_publish", "system.rollout", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert not WorkflowDefinition.objects.filter(key="system.rollout").exists()
    refusal = last_audit("workflow.publish")
    assert refusal.actor == "cli:sb_publish" and refusal.outcome == "refused"
    call_command("sb_publish", "ordinary", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert last_audit("workflow.publish").outcome == "accepted"


def test_services_refuse_callers_without_a_system_actor(workspace: Any) -> None:
    """What every caller without a claim gets (sb_run, sb_up, benchmarks): a ServiceError,
    which commands turn into a CommandError and the API and UI into a 403."""
    publish_system(workspace, "system.rollout", helpers.NOOP)
    with pytest.raises(ServiceError, match="reserved for system actors") as refusal:
        services.start_execution(workspace, workflow="system.rollout", input={})
    assert refusal.value.status == 403 and refusal.value.code == "reserved-key"
    with pytest.raises(PermissionDenied, match="reserved for system actors"):
        publish_version(workspace, "system.rollout", helpers.FAIL_IF)
    assert not Execution.objects.exists()


def test_the_reserved_patterns_are_a_setting(workspace: Any, settings: Any) -> None:
    settings.SB = {**settings.SB, "RESERVED_KEY_PATTERNS": ["platform.*", "ops-?"]}
    with pytest.raises(ServiceError, match="it matches 'ops-\\?'"):
        publish_version(workspace, "ops-1", helpers.NOOP)
    helpers.publish(workspace, "system.now-ordinary", helpers.NOOP)  # no longer reserved


def test_the_ui_shows_no_action_buttons_on_system_executions_and_says_why(
        workspace: Any, failed_system_fanout: tuple[Execution, Execution]) -> None:
    client = staff(workspace, Role.ADMIN, "ui-admin", superuser=True)
    for execution in failed_system_fanout:
        page = client.get(reverse("ui:execution-detail", args=[execution.pk])).content.decode()
        assert "only a signed system actor may retry or cancel it" in page
        assert reverse("ui:execution-retry", args=[execution.pk]) not in page
        assert reverse("ui:execution-cancel", args=[execution.pk]) not in page
