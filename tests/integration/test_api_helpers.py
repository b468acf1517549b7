"""Helpers shared by the API tests (this module holds no tests)."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from workflows.access import create_token
from workflows.models import Workspace

PROBLEM = "application/problem+json"


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
