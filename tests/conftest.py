"""Shared fixtures. Every database test runs on real PostgreSQL (embedded, or DATABASE_URL);
shared helpers live in ``tests/support``."""

from __future__ import annotations

from typing import Any

import pytest

import tests.support.handlers  # noqa: F401  (registers the test-only TASK handlers before any publish)
from tests.support import factories


@pytest.fixture
def workspace(db: Any) -> Any:
    return factories.default_workspace()


@pytest.fixture
def other_workspace(db: Any) -> Any:
    return factories.make_workspace("other")
