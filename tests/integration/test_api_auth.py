"""API authentication and roles: tokens (hashed, shown once, revocable), browser sessions,
the role each operation needs, and the audit record of refusals."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from tests.support import helpers
from tests.support.clients import api, ok, problem, session
from tests.support.factories import member
from workflows.access import create_token, revoke_token
from workflows.models import ApiToken, AuditEvent

pytestmark = pytest.mark.django_db

ANY_ID = "00000000-0000-4000-8000-000000000000"

# Every write, the least role allowed to do it, and a body.
WRITES = [
    ("post", "/api/v1/workflows/flow/versions", "author", helpers.NOOP),
    ("post", "/api/v1/executions", "operator", {"workflow": "flow"}),
    ("post", f"/api/v1/executions/{ANY_ID}/retry", "operator", None),
    ("post", f"/api/v1/executions/{ANY_ID}/children/retry-failed", "operator", {}),
    ("post", f"/api/v1/executions/{ANY_ID}/steps/t/retry", "operator", None),
    ("post", f"/api/v1/executions/{ANY_ID}/cancel", "operator", None),
    ("post", "/api/v1/destinations", "operator", {"name": "ledger", "base_url": "https://ledger.example"}),
    ("patch", "/api/v1/destinations/ledger", "operator", {"concurrency_limit": 2}),
]
READS = ["/api/v1/workflows", "/api/v1/workflows/flow", "/api/v1/executions", f"/api/v1/executions/{ANY_ID}",
         f"/api/v1/executions/{ANY_ID}/children", f"/api/v1/executions/{ANY_ID}/events", "/api/v1/destinations",
         "/api/v1/destinations/ledger", "/api/v1/versions/" + "0" * 64]
ROLES = ["viewer", "operator", "author", "admin"]
CSRF = "abcdefghijklmnopqrstuvwxyz012345"  # the UI sends its csrftoken cookie back in X-CSRFToken


def test_requests_without_a_token_are_401_with_a_challenge(workspace: Any) -> None:
    response = APIClient().get("/api/v1/executions")
    body = problem(response, 401)
    assert body["code"] == "not-authenticated"
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("header", ["Token", "Token a b", "Token sbt_unknown", "Bearer whatever"])
def test_malformed_unknown_or_foreign_credentials_are_401(workspace: Any, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    problem(client.get("/api/v1/workflows"), 401)


def test_a_revoked_token_stops_working(workspace: Any) -> None:
    token, secret = create_token(workspace, name="ci", role="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    ok(client.get("/api/v1/workflows"))
    revoke_token(token)
    assert problem(client.get("/api/v1/workflows"), 401)["detail"] == "unknown, revoked or expired token"


def test_tokens_are_stored_hashed(workspace: Any) -> None:
    token, secret = create_token(workspace, name="ci", role="viewer")
    stored = ApiToken.objects.filter(pk=token.pk).values().get()
    assert secret not in [str(value) for value in stored.values()]
    assert secret.startswith(stored["prefix"])


@pytest.mark.parametrize("role", ROLES)
def test_every_role_reads(workspace: Any, role: str) -> None:
    client = api(workspace, role)
    for path in READS:
        response = client.get(path)
        assert response.status_code in (200, 404), (path, response.status_code)


@pytest.mark.parametrize(("method", "path", "least", "body"), WRITES)
def test_writes_need_their_role_and_refusals_are_audited(workspace: Any, method: str, path: str, least: str,
                                                        body: Any) -> None:
    for role in ROLES[: ROLES.index(least)]:
        response = getattr(api(workspace, role), method)(path, body, format="json")
        assert problem(response, 403)["code"] == "forbidden"
        refusal = AuditEvent.objects.filter(actor=f"token:test-{role}").latest("id")
        assert refusal.outcome == "refused" and least in refusal.reason
    for role in ROLES[ROLES.index(least):]:
        response = getattr(api(workspace, role), method)(path, body, format="json")
        assert response.status_code != 403, (role, response.content)


def test_accepted_writes_are_audited(workspace: Any) -> None:
    client = api(workspace, "author")
    ok(client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"), 201)
    started = ok(client.post("/api/v1/executions", {"workflow": "flow"}, format="json"), 201)
    ok(client.post(f"/api/v1/executions/{started['id']}/cancel"))
    rows = list(AuditEvent.objects.filter(actor="token:test-author").order_by("id")
                .values_list("action", "target", "outcome"))
    assert rows == [("workflow.publish", "flow", "accepted"), ("execution.start", "flow", "accepted"),
                    ("execution.cancel", started["id"], "accepted")]


# --- browser sessions ---------------------------------------------------------------------------

def test_a_session_user_acts_with_their_membership_role(workspace: Any) -> None:
    client = session(member(workspace, "viewer"), APIClient, enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF
    ok(client.get("/api/v1/workflows"))
    response = client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json", HTTP_X_CSRFTOKEN=CSRF)
    assert "viewer role cannot publish" in problem(response, 403)["detail"]
    assert AuditEvent.objects.get(action="workflow.publish").actor.startswith("user:")


def test_session_writes_need_the_csrf_token(workspace: Any) -> None:
    client = session(member(workspace, "author"), APIClient, enforce_csrf_checks=True)
    assert "CSRF" in problem(client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json"),
                             403)["detail"]
    client.cookies["csrftoken"] = CSRF
    response = client.post("/api/v1/workflows/flow/versions", helpers.NOOP, format="json",
                           HTTP_X_CSRFTOKEN=CSRF)
    assert ok(response, 201)["created"] is True


def test_a_session_user_without_a_workspace_is_refused(workspace: Any) -> None:
    client = session(member(workspace, None, "nobody"), APIClient)
    assert "member" in problem(client.get("/api/v1/workflows"), 403)["detail"]


# --- manage.py sb_token -------------------------------------------------------------------------

def _run(*args: str) -> str:
    out = StringIO()
    call_command("sb_token", *args, stdout=out)
    return out.getvalue()


def test_sb_token_create_prints_the_token_alone_on_the_last_line(workspace: Any) -> None:
    output = _run("create", "--workspace", "default", "--role", "operator", "--name", "ci-bot")
    secret = output.strip().splitlines()[-1]
    assert secret.startswith("sbt_") and " " not in secret
    assert len(output.strip().splitlines()) > 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    ok(client.get("/api/v1/workflows"))
    token = ApiToken.objects.get(name="ci-bot")
    assert token.role == "operator" and token.workspace == workspace
    assert AuditEvent.objects.filter(action="token.create", target="ci-bot").exists()


def test_sb_token_create_names_a_token_by_default(workspace: Any) -> None:
    _run("create", "--role", "viewer")
    assert ApiToken.objects.get().name.startswith("viewer-")


def test_sb_token_list_shows_prefixes_never_secrets(workspace: Any) -> None:
    secret = _run("create", "--role", "admin", "--name", "ops").strip().splitlines()[-1]
    listing = _run("list")
    assert "ops" in listing and secret[:12] in listing and secret not in listing


def test_sb_token_revoke_by_name_or_prefix(workspace: Any) -> None:
    first = _run("create", "--name", "a").strip().splitlines()[-1]
    second = _run("create", "--name", "b").strip().splitlines()[-1]
    _run("revoke", "a")
    _run("revoke", second[:12])
    assert ApiToken.objects.filter(revoked_at__isnull=False).count() == 2
    for secret in (first, second):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        problem(client.get("/api/v1/workflows"), 401)
    assert "a" in _run("list", "--all")


def test_sb_token_refuses_ambiguous_or_unknown_names(workspace: Any) -> None:
    _run("create", "--name", "twin")
    _run("create", "--name", "twin")
    with pytest.raises(CommandError, match="matches 2 tokens"):
        _run("revoke", "twin")
    with pytest.raises(CommandError, match="no active token"):
        _run("revoke", "ghost")
    with pytest.raises(CommandError, match="no workspace"):
        _run("create", "--workspace", "nowhere")
