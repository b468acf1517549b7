"""Publishing versions and reading workflows and versions over the API (S14)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import helpers
from tests.support.clients import api, ok, problem
from workflows.models import WorkflowDefinition, WorkflowVersion

pytestmark = pytest.mark.django_db

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}}


def test_publishing_new_logic_is_201_and_the_same_logic_again_is_200(workspace: Any) -> None:
    client = api(workspace, "author")
    first = ok(client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"), 201)
    assert first["key"] == "flow" and first["created"] is True and len(first["hash"]) == 64
    reordered = json.loads(json.dumps(helpers.NOOP, sort_keys=True))
    reordered["vertices"]["t"]["retry"] = {"maxAttempts": 3}  # the default, spelled out: same logic
    again = ok(client.post("/api/v1/workflows/flow/versions", reordered, format="json"), 200)
    assert again == {**first, "created": False}
    assert WorkflowVersion.objects.count() == 1


def test_an_invalid_document_is_400_with_every_error_and_its_path(workspace: Any) -> None:
    doc = {"start": "missing", "vertices": {"a": {"type": "NOPE"}, "b": {"type": "TASK", "handler": "no.such"}}}
    body = problem(api(workspace).post("/api/v1/workflows/flow/versions", doc, format="json"), 400)
    assert body["code"] == "invalid-workflow"
    paths = {error["path"] for error in body["errors"]}
    assert {"$.start", "$.vertices.a.type"} <= paths
    assert all(error["message"] for error in body["errors"])
    assert not WorkflowDefinition.objects.exists()


def test_an_unregistered_handler_is_reported_at_its_path(workspace: Any) -> None:
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "no.such"}}}
    body = problem(api(workspace).post("/api/v1/workflows/flow/versions", doc, format="json"), 400)
    assert body["errors"] == [{"path": "$.vertices.t.handler", "message": "no TASK handler is registered as "
                                                                          "'no.such'"}]


@pytest.mark.parametrize("doc", [[], "text", 3, None, {}])
def test_a_document_that_is_not_a_workflow_object_is_400(workspace: Any, doc: Any) -> None:
    response = api(workspace).post("/api/v1/workflows/flow/versions", json.dumps(doc),
                                   content_type="application/json")
    assert problem(response, 400)["errors"]


@pytest.mark.parametrize("key", ["-starts-with-dash", "a" * 129, "sp ace", "ü"])
def test_an_invalid_key_is_400_naming_the_key(workspace: Any, key: str) -> None:
    response = api(workspace).post(f"/api/v1/workflows/{key}/versions", helpers.NOOP, format="json")
    assert problem(response, 400)["errors"][0]["field"] == "key"
    assert not WorkflowDefinition.objects.exists()


def test_publishing_moves_current_and_republishing_rolls_back(workspace: Any) -> None:
    client = api(workspace, "author")
    old = ok(client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"), 201)["hash"]
    new = ok(client.post("/api/v1/workflows/flow/versions", ECHO, format="json"), 201)["hash"]
    assert ok(client.get("/api/v1/workflows/flow"))["current_version"] == new
    ok(client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"), 200)
    detail = ok(client.get("/api/v1/workflows/flow"))
    assert detail["current_version"] == old
    assert [version["hash"] for version in detail["versions"]] == [new, old]
    assert detail["version_count"] == 2
    assert detail["versions"][0]["author"] == "token:test-author"


def test_workflows_are_listed_by_key_in_pages(workspace: Any) -> None:
    for key in ("c", "a", "b"):
        helpers.publish(workspace, key, helpers.NOOP)
    client = api(workspace, "viewer")
    page = ok(client.get("/api/v1/workflows?limit=2"))
    assert [row["key"] for row in page["results"]] == ["a", "b"]
    assert all(len(row["current_version"]) == 64 for row in page["results"])
    last = ok(client.get(page["next"]))
    assert [row["key"] for row in last["results"]] == ["c"] and last["next"] is None


def test_unknown_workflows_and_versions_are_404(workspace: Any) -> None:
    client = api(workspace, "viewer")
    problem(client.get("/api/v1/workflows/ghost"), 404)
    problem(client.get("/api/v1/versions/" + "a" * 64), 404)
    problem(client.get("/api/v1/versions/not-a-hash"), 404)


def test_a_version_shows_its_normalised_dsl_and_every_key_using_it(workspace: Any) -> None:
    digest = helpers.publish(workspace, "first", helpers.NOOP).hash
    helpers.publish(workspace, "second", helpers.NOOP)
    version = ok(api(workspace, "viewer").get(f"/api/v1/versions/{digest}"))
    assert version["hash"] == digest
    assert version["workflows"] == ["first", "second"]
    assert version["dsl"]["vertices"]["t"]["handler"] == "demo.noop"
    assert version["author"] == "test"
