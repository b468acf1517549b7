"""Security at the API's edges (issue 15, findings 5 and 6): roles are checked before a body
is read, bodies have a limit per endpoint (413), requests without valid credentials write
nothing, and refused claims of authenticated requests are audited with their source IP and
rate-limited per token."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.db import connection
from django.test import RequestFactory, override_settings
from rest_framework.request import Request
from rest_framework.test import APIClient

from executions.api import auth
from executions.api.errors import PayloadTooLarge
from executions.api.parsers import JSONParser
from executions.api.views.base import read_body
from executions.models import Execution
from tests.support import helpers
from tests.support.claims import Actor, claim, make_actor, send, signed
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent, WorkflowDefinition

pytestmark = pytest.mark.django_db

PUBLISH = "/api/v1/workflows/system.rollout/versions"
MIB = 1024 * 1024


def limits(**values: int) -> Any:
    return override_settings(SB={**settings.SB, **values})


@pytest.fixture
def flow(workspace: Any) -> None:
    ok(api(workspace, "author").post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"), 201)


@pytest.fixture
def deployer(workspace: Any) -> Actor:
    return make_actor("deployer")


@pytest.fixture
def bytes_read(monkeypatch: Any) -> list[int]:
    """Bytes the web process read from request bodies; fails the test if a parser runs."""
    read: list[int] = []
    original = WSGIRequest.read

    def counting(self: WSGIRequest, *args: Any) -> bytes:
        data = original(self, *args)
        read.append(len(data))
        return data

    def no_parse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the body was parsed")

    monkeypatch.setattr(WSGIRequest, "read", counting)
    monkeypatch.setattr(JSONParser, "parse", no_parse)
    return read


def big_start(size: int) -> bytes:
    """A start of at least ``size`` bytes whose input is an array of small elements (the costly kind)."""
    return b'{"workflow": "flow", "input": [' + b"0," * (size // 2) + b"0]}"


# --- finding 5: check the role, then read within a limit, then parse ----------------------------------

def test_a_viewer_posting_8_mb_is_refused_before_the_body_is_read(workspace: Any, flow: None,
                                                                  bytes_read: list[int]) -> None:
    raw = big_start(8 * MIB - 100)  # within the limit: only the role refuses it
    response = api(workspace, "viewer").generic("POST", "/api/v1/executions", raw, content_type="application/json")
    assert "viewer role cannot start executions" in problem(response, 403)["detail"]
    assert sum(bytes_read) == 0
    refusal = AuditEvent.objects.get(action="execution.start")
    assert refusal.outcome == "refused" and refusal.actor == "token:test-viewer"


@pytest.mark.parametrize(("path", "setting", "default"), [("/api/v1/executions", "MAX_START_BYTES", 8 * MIB),
                                                          (PUBLISH.replace("system.rollout", "flow"),
                                                           "MAX_PUBLISH_BYTES", MIB)])
def test_bodies_over_the_endpoint_limit_are_413_before_reading(
        workspace: Any, flow: None, bytes_read: list[int], path: str, setting: str, default: int) -> None:
    assert settings.SB[setting] == default
    raw = big_start(default + 1)
    body = problem(api(workspace, "admin").generic("POST", path, raw, content_type="application/json"), 413)
    assert body["code"] == "payload-too-large" and f"SB_{setting}" in body["detail"]
    assert f"{default:,} bytes" in body["detail"]
    assert sum(bytes_read) == 0


def test_the_limit_is_configurable_and_a_body_within_it_is_accepted(workspace: Any, flow: None) -> None:
    client = api(workspace, "operator")
    raw = json.dumps({"workflow": "flow", "input": {"pad": "x" * 2000}}).encode()
    with limits(MAX_START_BYTES=1000):
        problem(client.generic("POST", "/api/v1/executions", raw, content_type="application/json"), 413)
    with limits(MAX_START_BYTES=len(raw)):
        ok(client.generic("POST", "/api/v1/executions", raw, content_type="application/json"), 201)
    assert Execution.objects.count() == 1


def test_a_body_without_a_length_is_cut_off_while_reading() -> None:
    """Chunked bodies have no Content-Length: the reader stops one chunk past the limit."""
    request = RequestFactory().post("/api/v1/executions", b"", content_type="application/json")
    request.META.pop("CONTENT_LENGTH", None)
    stream = io.BytesIO(b"[" + b"0," * (4 * MIB))
    request._stream = stream  # type: ignore[attr-defined]  # what a server hands Django for a chunked body
    with pytest.raises(PayloadTooLarge, match="larger than 1,000,000 bytes"):
        read_body(Request(request), 1_000_000, "MAX_START_BYTES")
    assert stream.tell() <= 1_000_000 + 64 * 1024


def test_a_claim_on_a_read_is_read_within_the_write_limit(workspace: Any, deployer: Actor) -> None:
    raw = b" " * (settings.SB["MAX_WRITE_BYTES"] + 1)
    response = send(api(workspace, "viewer"), "GET", "/api/v1/workflows", raw,
                    claim(deployer, "GET", "/api/v1/workflows", raw))
    assert "SB_MAX_WRITE_BYTES" in problem(response, 413)["detail"]


# --- finding 6: no writes without valid credentials ------------------------------------------------------

def row_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        tables = [name for (name,) in cursor.fetchall()]
        counts = {}
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}"')  # table names from pg_tables
            counts[table] = cursor.fetchone()[0]
    return counts


def test_fifty_anonymous_requests_with_claim_headers_write_nothing(workspace: Any, deployer: Actor) -> None:
    before = row_counts()
    anonymous = APIClient()
    for index in range(50):
        method, path = [("POST", PUBLISH), ("GET", "/api/v1/workflows"), ("POST", "/api/v1/executions")][index % 3]
        headers = claim(deployer, method, path, b"{}") if index % 2 else {"HTTP_X_SB_ACTOR": "deployer"}
        response = send(anonymous, method, path, b"{}", headers)
        assert response.status_code in (401, 403), response.status_code
    assert row_counts() == before


def test_a_refused_claim_of_a_token_is_audited_with_its_source_ip(workspace: Any, deployer: Actor) -> None:
    before = AuditEvent.objects.count()
    client = api(workspace, "author")
    data = json.dumps(helpers.NOOP).encode()
    response = send(client, "POST", PUBLISH, data, {**claim(deployer, "POST", PUBLISH, data, timestamp=1),
                                                     "REMOTE_ADDR": "203.0.113.7"})
    assert problem(response, 403)["code"] == "claim-refused"
    assert AuditEvent.objects.count() == before + 1
    row = AuditEvent.objects.latest("id")
    assert (row.action, row.outcome, row.detail["ip"], row.detail["via"]) == ("claim", "refused", "203.0.113.7",
                                                                             "token:test-author")
    assert not WorkflowDefinition.objects.exists()


def test_refused_claims_are_rate_limited_per_token(workspace: Any, deployer: Actor, monkeypatch: Any) -> None:
    monkeypatch.setattr(auth, "REFUSAL_WINDOW", 86400)  # one window for the whole test, wherever the minute ends
    client, other = api(workspace, "author"), api(workspace, "author", name="other")
    with limits(CLAIM_REFUSALS_PER_MINUTE=3):
        for _ in range(3):
            problem(signed(client, deployer, "POST", PUBLISH, helpers.NOOP, timestamp=1), 403)
        rows = AuditEvent.objects.count()
        body = problem(signed(client, deployer, "POST", PUBLISH, helpers.NOOP), 429)  # even a valid one
        assert body["code"] == "throttled" and "SB_CLAIM_REFUSALS_PER_MINUTE" in body["detail"]
        assert AuditEvent.objects.count() == rows  # a throttled attempt writes no audit row
        ok(signed(other, deployer, "POST", PUBLISH, helpers.NOOP), 201)  # another token is not limited
