"""Clients as the tests' users hold them — a browser session or an API token — and the
checks every test makes of what they get back."""

from __future__ import annotations

import html
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from tests.support.factories import member
from workflows.access import create_token
from workflows.models import Workspace

PROBLEM = "application/problem+json"


def session(user: Any, client_class: type[Client] = Client, **client_options: Any) -> Any:
    """A client of ``client_class`` logged in as ``user`` (no password, no login form)."""
    client = client_class(**client_options)
    client.force_login(user)
    return client


def client_for(workspace: Workspace, role: str | None, name: str = "someone", **client_options: Any) -> Client:
    """A logged-in client; with a role, its new user is a member of ``workspace`` with it."""
    return session(member(workspace, role, name), **client_options)


def staff(workspace: Workspace, role: str | None, name: str, *, superuser: bool = False) -> Client:
    """A logged-in staff user (so the Django admin lets them in), a member with ``role`` if given."""
    return session(member(workspace, role, name, is_staff=True, is_superuser=superuser))


def api(workspace: Workspace, role: str = "admin", *, name: str | None = None) -> APIClient:
    """A client authenticated with a fresh token of ``role`` in ``workspace``."""
    _, secret = create_token(workspace, name=name or f"test-{role}", role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def problem(response: Any, status: int) -> dict[str, Any]:
    """The problem body of ``response`` after checking its status and media type."""
    assert response.status_code == status, (response.status_code, response.content[:2000])
    assert response["Content-Type"].startswith(PROBLEM), response["Content-Type"]
    body = response.json()
    assert body["status"] == status
    assert {"type", "title", "status", "code", "detail", "errors"} <= set(body)
    return body


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, (response.status_code, response.content[:2000])
    return response.json()


def text(response: Any) -> str:
    """A page's HTML with its character references resolved (what a reader sees)."""
    return html.unescape(response.content.decode())
