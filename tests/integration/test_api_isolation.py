"""Tenancy: an object of another workspace is a 404 — never visible, never actionable."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Destination, Execution
from tests.support import handlers, helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent, WorkflowDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(other_workspace: Any) -> dict[str, str]:
    """Another workspace's objects: a failed fan-out (with a failed child), a destination."""
    handlers.set_flaky(True)
    helpers.publish(other_workspace, "child", helpers.FLAKY)
    version = helpers.publish(other_workspace, "secret-flow", helpers.fanout_doc())
    parent = helpers.start(other_workspace, "secret-flow", {"items": [{"fail": True}, {"fail": False}]},
                           idempotency_key="shared-key")
    helpers.run_engine()
    child = Execution.objects.get(parent=parent, item_index=0)
    assert child.status == "FAILED"
    Destination.objects.create(workspace=other_workspace, name="their-ledger", base_url="https://them.example")
    return {"parent": str(parent.pk), "child": str(child.pk), "version": version.hash}


def test_another_workspaces_objects_are_404_to_read(workspace: Any, theirs: dict[str, str]) -> None:
    client = api(workspace, "admin")
    for path in (f"/api/v1/executions/{theirs['parent']}", f"/api/v1/executions/{theirs['child']}",
                 f"/api/v1/executions/{theirs['parent']}/children", f"/api/v1/executions/{theirs['parent']}/events",
                 "/api/v1/workflows/secret-flow", f"/api/v1/versions/{theirs['version']}",
                 "/api/v1/destinations/their-ledger"):
        assert problem(client.get(path), 404)["code"] == "not-found"


def test_another_workspaces_objects_are_never_listed(workspace: Any, theirs: dict[str, str]) -> None:
    client = api(workspace, "admin")
    for path in ("/api/v1/executions", f"/api/v1/executions?parent={theirs['parent']}",
                 "/api/v1/executions?workflow=secret-flow", "/api/v1/workflows", "/api/v1/destinations"):
        assert ok(client.get(path))["results"] == [], path


def test_another_workspaces_objects_cannot_be_acted_on(workspace: Any, theirs: dict[str, str]) -> None:
    handlers.set_flaky(False)
    client = api(workspace, "admin")
    for path in (f"/api/v1/executions/{theirs['child']}/retry",
                 f"/api/v1/executions/{theirs['child']}/steps/t/retry",
                 f"/api/v1/executions/{theirs['parent']}/children/retry-failed",
                 f"/api/v1/executions/{theirs['parent']}/cancel"):
        problem(client.post(path, format="json"), 404)
    problem(client.patch("/api/v1/destinations/their-ledger", {"concurrency_limit": 1}, format="json"), 404)
    child = Execution.objects.get(pk=theirs["child"])
    assert child.status == "FAILED" and child.attempt == 1
    assert Execution.objects.get(pk=theirs["parent"]).status == "FAILED"
    assert Destination.objects.get(name="their-ledger").concurrency_limit is None
    assert AuditEvent.objects.filter(workspace=workspace, outcome="refused").count() == 5


def test_another_workspaces_workflows_and_versions_cannot_be_started(workspace: Any,
                                                                      theirs: dict[str, str]) -> None:
    client = api(workspace, "admin")
    problem(client.post("/api/v1/executions", {"workflow": "secret-flow"}, format="json"), 404)
    problem(client.post("/api/v1/executions", {"version": theirs["version"]}, format="json"), 404)
    assert not Execution.objects.filter(workspace=workspace).exists()


def test_keys_and_names_are_per_workspace(workspace: Any, other_workspace: Any, theirs: dict[str, str]) -> None:
    client = api(workspace, "admin")
    ok(client.post("/api/v1/workflows/secret-flow/versions", helpers.NOOP, format="json"), 201)
    assert WorkflowDefinition.objects.filter(key="secret-flow").count() == 2
    mine = ok(client.post("/api/v1/executions", {"workflow": "secret-flow"}, format="json",
                          HTTP_IDEMPOTENCY_KEY="shared-key"), 201)
    assert mine["id"] != theirs["parent"]
    ok(client.post("/api/v1/destinations", {"name": "their-ledger", "base_url": "https://us.example"},
                   format="json"), 201)
    assert Destination.objects.get(workspace=other_workspace).base_url == "https://them.example"
