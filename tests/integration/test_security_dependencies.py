"""What reserved workflows depend on is reserved too (issue 15, finding 10): a ``system.*``
workflow calls only ``system.*`` destinations, which only a verified system actor creates or
changes, and starts only reserved workflows or versions pinned by hash — refused at publish
time with the JSON path, so no such version exists for the engine to run."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from executions.models import Destination, Execution
from tests.support import helpers
from tests.support.claims import SETUP, Actor, make_actor, publish_system, signed, start_system
from tests.support.clients import api, client_for, ok, problem
from workflows.models import AuditEvent, WorkflowDefinition
from workflows.services import publish_version

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CALL_CRM = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": "crm", "method": "POST"}}}


@pytest.fixture
def deployer(workspace: Any) -> Actor:
    return make_actor("deployer")


def versions_path(key: str) -> str:
    return f"/api/v1/workflows/{key}/versions"


@pytest.mark.parametrize(("doc", "path"), [
    (CALL_CRM, "$.vertices.call.destination"),
    ({"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop", "destination": "crm"}}},
     "$.vertices.t.destination"),
    (helpers.fanout_doc("migrate-entry"), "$.vertices.fan.workflow"),
    ({"start": "c", "vertices": {"c": {"type": "CHAIN", "workflow": "next-step"}}}, "$.vertices.c.workflow"),
])
def test_a_reserved_workflow_with_an_ordinary_dependency_is_refused_at_publish(
        workspace: Any, deployer: Actor, doc: dict[str, Any], path: str) -> None:
    response = signed(api(workspace, "author"), deployer, "POST", versions_path("system.rollout"), doc)
    body = problem(response, 403)
    assert body["code"] == "reserved-key" and "depends on what is not reserved" in body["detail"]
    assert [error["path"] for error in body["errors"]] == [path]
    assert not WorkflowDefinition.objects.filter(key="system.rollout").exists()
    assert AuditEvent.objects.filter(action="workflow.publish", outcome="refused").exists()


def test_reserved_dependencies_and_pinned_versions_are_accepted(workspace: Any, deployer: Actor) -> None:
    child = helpers.publish(workspace, "migrate-entry", helpers.NOOP)
    pinned = helpers.fanout_doc("migrate-entry")
    pinned["vertices"]["fan"]["version"] = child.hash
    client = api(workspace, "author")
    for key, doc in [("system.pinned", pinned), ("system.fan", helpers.fanout_doc("system.child")),
                     ("system.call", {"start": "c", "vertices": {"c": {"type": "HTTP", "destination": "system.crm"}}}),
                     ("system.loop", {"start": "c", "vertices": {"c": {"type": "CHAIN", "workflow": "self"}}})]:
        ok(signed(client, deployer, "POST", versions_path(key), doc), 201)


def test_a_pinned_child_of_a_reserved_fan_out_runs_that_version_whatever_is_published_later(workspace: Any) -> None:
    """The run-time half: the only way a reserved workflow reaches ordinary logic is a pinned
    hash, so a new version published under that key by an author changes nothing it runs."""
    child = helpers.publish(workspace, "entry", helpers.NOOP)
    doc = helpers.fanout_doc("entry")
    doc["vertices"]["fan"]["version"] = child.hash
    publish_system(workspace, "system.fan", doc)
    helpers.publish(workspace, "entry", {"start": "t", "vertices": {"t": {"type": "FAIL", "error": "new logic"}}})
    with pytest.raises(Exception, match="not the current version of 'entry'"):
        publish_version(workspace, "system.unpinned", helpers.fanout_doc("entry"), system_actor=SETUP)
    parent = start_system(workspace, "system.fan", {"items": [1, 2]})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert set(Execution.objects.filter(parent=parent).values_list("version__hash", flat=True)) == {child.hash}


def test_reserved_destinations_are_created_and_changed_only_with_a_claim(workspace: Any, deployer: Actor) -> None:
    admin = api(workspace, "admin")
    body = {"name": "system.crm", "base_url": "https://crm.example"}
    refused = problem(admin.post("/api/v1/destinations", body, format="json"), 403)
    assert refused["code"] == "reserved-key" and "destination 'system.crm' is reserved" in refused["detail"]
    assert not Destination.objects.exists()
    ok(signed(api(workspace, "operator"), deployer, "POST", "/api/v1/destinations", body), 201)
    change = {"concurrency_limit": 0}
    assert problem(admin.patch("/api/v1/destinations/system.crm", change, format="json"), 403)["code"] == \
        "reserved-key"
    assert Destination.objects.get().concurrency_limit != 0
    ok(signed(api(workspace, "operator"), deployer, "PATCH", "/api/v1/destinations/system.crm",
              {"base_url": "https://crm2.example"}))
    assert Destination.objects.get().base_url == "https://crm2.example"


def test_the_ui_cannot_create_or_change_a_reserved_destination(workspace: Any, deployer: Actor) -> None:
    operator = client_for(workspace, "admin", "op")
    operator.post("/rate-limits/new", {"name": "system.crm", "base_url": "https://crm.example",
                                       "timeout_seconds": "5", "concurrency_limit": "4"}, **HTMX)
    assert not Destination.objects.exists()
    ok(signed(api(workspace, "operator"), deployer, "POST", "/api/v1/destinations",
              {"name": "system.crm", "base_url": "https://crm.example", "concurrency_limit": 4}), 201)
    destination = Destination.objects.get()
    operator.post(reverse("ui:destination-limit", args=[destination.pk]), {"concurrency_limit": "0"}, **HTMX)
    assert Destination.objects.get().concurrency_limit == 4
    assert AuditEvent.objects.filter(action="destination.update", outcome="refused").exists()


# --- at run time: versions published before the rule (or under other reserved patterns) -------

@pytest.fixture
def published_before_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishing skips the dependency check, as it did before finding 10 was fixed."""
    from workflows import sudo

    monkeypatch.setattr(sudo, "check_reserved_dependencies", lambda key, workflow: None)


@pytest.mark.parametrize(("doc", "vertex", "message"), [
    (helpers.fanout_doc("migrate-entry"), "fan", "may start only reserved workflows"),
    ({"start": "c", "vertices": {"c": {"type": "CHAIN", "workflow": "next-step"}}}, "c",
     "may start only reserved workflows"),
    (CALL_CRM, "call", "may call only reserved destinations"),
])
def test_the_engine_refuses_an_ordinary_dependency_of_a_reserved_workflow(
        workspace: Any, published_before_the_rule: None, doc: dict[str, Any], vertex: str, message: str) -> None:
    helpers.publish(workspace, "migrate-entry", helpers.NOOP)
    helpers.publish(workspace, "next-step", helpers.NOOP)
    Destination.objects.create(workspace=workspace, name="crm", base_url="http://127.0.0.1:9/")
    publish_system(workspace, "system.rollout", doc)
    execution = start_system(workspace, "system.rollout", {"items": [1, 2]})
    helpers.run_engine()
    step = helpers.step(execution, vertex)
    assert step.status == "FAILED" and message in step.error
    assert step.attempt == 1, "not retried: it would be refused again"
    assert not Execution.objects.filter(parent=execution).exists()
    assert not Execution.objects.filter(chained_from=execution).exists()
