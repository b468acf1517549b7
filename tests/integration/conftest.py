"""Browser-session clients for view tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.support.clients import client_for
from workflows.models import Role


@pytest.fixture
def operator(workspace: Any) -> Client:
    return client_for(workspace, Role.OPERATOR, "op")


@pytest.fixture
def viewer(workspace: Any) -> Client:
    return client_for(workspace, Role.VIEWER, "view")
