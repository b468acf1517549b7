"""Browser-session clients for view tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from workflows.models import Membership, Role


def client_for(workspace: Any, role: str | None, name: str = "someone", **kwargs: Any) -> Client:
    """A logged-in client; with a role, its user is a member of ``workspace`` with it."""
    user = get_user_model().objects.create_user(name, password="pw")
    if role is not None:
        Membership.objects.create(user=user, workspace=workspace, role=role)
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def operator(workspace: Any) -> Client:
    return client_for(workspace, Role.OPERATOR, "op")


@pytest.fixture
def viewer(workspace: Any) -> Client:
    return client_for(workspace, Role.VIEWER, "view")
