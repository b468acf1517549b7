"""The OpenAPI schema is valid, served with offline docs, and true: schemathesis fuzzes every
operation in-process and finds no server error and no response the schema does not allow;
real responses (a fan-out with failures, retries, a cancel) conform too."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from executions.api import converters
from executions.models import Execution
from tests.support import helpers
from workflows.access import create_token

pytestmark = pytest.mark.django_db

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]

# Loaded at collection: serving the schema reads no database. (schemathesis' lazy
# ``from_fixture`` loader does not work with pytest 9.)
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture(autouse=True)
def keep_test_connection() -> Any:
    """Django closes connections at the start and end of each WSGI request; inside a test's
    transaction that would drop the connection (Django's test client does the same)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(workspace: Any) -> str:
    return create_token(workspace, name="schemathesis", role="admin")[1]


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_fuzzing_finds_no_server_error_and_no_schema_violation(case: Any, token: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)


def call(token: str, method: str, path: str, *, expect: int = 200, body: Any = None, **params: Any) -> Any:
    """One explicit request through schemathesis, validated against the schema."""
    operation = schema[path][method]
    query = params.pop("query", None)
    kwargs = {"body": body} if body is not None else {}
    case = operation.Case(path_parameters=params, query=query, media_type="application/json", **kwargs)
    response = case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)
    assert response.status_code == expect, (method, path, response.status_code, response.text[:1000])
    return response.json()


def test_real_responses_conform(workspace: Any, token: str) -> None:
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    call(token, "POST", "/api/v1/workflows/{key}/versions", key="parent", body=helpers.fanout_doc(), expect=201)
    call(token, "POST", "/api/v1/workflows/{key}/versions", key="parent", body=helpers.fanout_doc())
    items = [{"fail": index % 4 == 0} for index in range(12)]
    started = call(token, "POST", "/api/v1/executions", body={"workflow": "parent", "input": {"items": items}},
                   expect=201)
    helpers.run_engine()
    parent = started["id"]
    failed = [str(pk) for pk in Execution.objects.filter(parent_id=parent, status="FAILED")
              .order_by("item_index").values_list("pk", flat=True)]
    detail = call(token, "GET", "/api/v1/executions/{id}", id=parent)
    assert detail["status"] == "FAILED" and detail["counts"]["FAILED"] == 3
    call(token, "GET", "/api/v1/executions", query={"top_level": "true", "limit": 1})
    call(token, "GET", "/api/v1/executions/{id}/children", id=parent, query={"status": "FAILED", "limit": 2})
    call(token, "GET", "/api/v1/executions/{id}/events", id=parent, query={"limit": 5})
    call(token, "GET", "/api/v1/workflows")
    call(token, "GET", "/api/v1/workflows/{key}", key="parent")
    call(token, "GET", "/api/v1/versions/{hash}", hash=started["version"])
    call(token, "POST", "/api/v1/executions/{id}/retry", id=failed[0])
    call(token, "POST", "/api/v1/executions/{id}/steps/{vertex}/retry", id=failed[1], vertex="t")
    assert call(token, "POST", "/api/v1/executions/{id}/children/retry-failed", id=parent, body={}) == {"retried": 1}
    call(token, "POST", "/api/v1/executions/{id}/cancel", id=parent)
    call(token, "POST", "/api/v1/destinations", body={"name": "ledger", "base_url": "https://ledger.example"},
         expect=201)
    call(token, "GET", "/api/v1/destinations")
    call(token, "GET", "/api/v1/destinations/{name}", name="ledger")
    call(token, "PATCH", "/api/v1/destinations/{name}", name="ledger", body={"concurrency_limit": 4})


def test_schema_is_valid_without_warnings(tmp_path: Any) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))


def test_path_patterns_in_the_schema_are_the_routes_patterns() -> None:
    assert django_settings.SPECTACULAR_SETTINGS["PATH_CONVERTER_OVERRIDES"] == converters.OPENAPI


def test_interactive_docs_are_served_offline() -> None:
    client = APIClient()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/api/schema/" in html
    bundle = "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
    assert f"/static/{bundle}" in html
    assert finders.find(bundle), "Swagger UI must come from the sidecar package, not a CDN"
    assert "cdn." not in html.lower()
    schema_response = client.get("/api/schema/?format=json")
    assert schema_response.status_code == 200
    assert schema_response.json()["openapi"].startswith("3.")
