"""Bad requests anywhere are 4xx problems with precise details — never a 500, nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from executions.models import Execution
from tests.support import helpers
from tests.support.clients import api, problem
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(workspace: Any) -> Any:
    helpers.publish(workspace, "flow", helpers.NOOP)
    return api(workspace, "admin")


def post_raw(client: Any, path: str, raw: bytes | str, content_type: str = "application/json") -> Any:
    return client.generic("POST", path, raw, content_type=content_type)


@pytest.mark.parametrize("raw", ['{"workflow": "flow",', "{'workflow': 'flow'}", '{"a": NaN}', '{"a": Infinity}',
                                 b"\xff\xfe{}", '\ufeff{"workflow": "flow"}'])
def test_malformed_json_is_400(client: Any, raw: bytes | str) -> None:
    body = problem(post_raw(client, "/api/v1/executions", raw), 400)
    assert body["code"] == "malformed-request"
    assert not Execution.objects.exists()


@pytest.mark.parametrize(("raw", "path"), [
    ('{"workflow": "flow", "input": {"name": "a\\u0000b"}}', "$.input.name"),
    ('{"workflow": "flow", "input": ["ok", "\\ud800"]}', "$.input[1]"),
    ('{"workflow": "flow", "input": {"n": 1e400}}', "$.input.n"),
    ('{"workflow": "flow", "input": {"we\\u0000ird": 1}}', '$.input["we\\u0000ird"]'),
])
def test_values_postgres_cannot_store_are_400_at_their_path(client: Any, raw: str, path: str) -> None:
    body = problem(post_raw(client, "/api/v1/executions", raw), 400)
    assert body["errors"][0]["path"] == path
    assert not Execution.objects.exists()


def test_excessive_nesting_is_400(client: Any) -> None:
    deep = '{"workflow": "flow", "input": ' + "[" * 150 + "]" * 150 + "}"
    assert "nested" in problem(post_raw(client, "/api/v1/executions", deep), 400)["errors"][0]["message"]
    deeper = "[" * 100_000 + "]" * 100_000
    assert problem(post_raw(client, "/api/v1/executions", deeper), 400)["code"] == "malformed-request"


def test_a_dsl_with_nul_characters_is_400_and_nothing_is_published(client: Any) -> None:
    raw = '{"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop", "input": "\\u0000"}}}'
    assert problem(post_raw(client, "/api/v1/workflows/new/versions", raw), 400)["errors"][0]["path"] == \
        "$.vertices.t.input"
    assert not WorkflowDefinition.objects.filter(key="new").exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_an_oversize_body_is_413(client: Any) -> None:
    raw = '{"workflow": "flow", "input": "' + "x" * 2000 + '"}'
    assert problem(post_raw(client, "/api/v1/executions", raw), 413)["code"] == "payload-too-large"
    assert not Execution.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_an_oversize_body_without_a_declared_length_is_413(client: Any) -> None:
    raw = ('{"workflow": "flow", "input": "' + "x" * 2000 + '"}').encode()
    response = client.generic("POST", "/api/v1/executions", raw, content_type="application/json",
                              CONTENT_LENGTH="")
    assert response.status_code in (400, 413)  # with no length the body reads as empty: never a 500


def test_a_form_body_is_415(client: Any) -> None:
    response = post_raw(client, "/api/v1/executions", "workflow=flow", "application/x-www-form-urlencoded")
    assert problem(response, 415)["code"] == "unsupported-media-type"


def test_unknown_paths_and_methods_are_problems(client: Any) -> None:
    assert problem(client.get("/api/v1/nowhere"), 404)["code"] == "not-found"
    assert problem(client.get("/api/v1/executions/"), 404)  # no trailing-slash redirects
    assert problem(client.delete("/api/v1/executions"), 405)["code"] == "method-not-allowed"
    assert problem(client.put("/api/v1/destinations/x", {}, format="json"), 405)


@pytest.mark.parametrize("path", ["/api/v1/workflows/%00", "/api/v1/versions/%00", "/api/v1/destinations/%00",
                                  "/api/v1/executions/%00", "/api/v1/executions/%00/events",
                                  "/api/v1/workflows/" + "k" * 200, "/api/v1/executions/x%0A",
                                  "/api/v1/executions/x%0A/cancel"])
def test_identifiers_that_cannot_exist_are_404_without_touching_the_database(client: Any, path: str) -> None:
    problem(client.get(path), 404)


def test_a_problem_names_every_bad_field(client: Any) -> None:
    body = problem(client.post("/api/v1/destinations", {"name": 1, "base_url": [], "concurrency_limit": "x"},
                               format="json"), 400)
    # Destination rules and their messages are executions/destinations/rules.py's (the UI shows the same).
    name = "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
    base_url = "must be an http(s) URL of at most 500 characters, without user name, password, query or fragment"
    limit = "must be a whole number from 0 to 1,000,000, or empty for unlimited"
    assert body == {
        "type": "about:blank", "title": "Bad Request", "status": 400, "code": "invalid",
        "detail": f"name: {name}; base_url: {base_url}; concurrency_limit: {limit}",
        "errors": [{"field": "name", "message": name},
                   {"field": "base_url", "message": base_url},
                   {"field": "concurrency_limit", "message": limit}],
    }
