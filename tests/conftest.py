"""Shared fixtures. Every database test runs on real PostgreSQL (embedded, or DATABASE_URL)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import helpers


@pytest.fixture
def workspace(db: Any) -> Any:
    return helpers.default_workspace()


@pytest.fixture
def other_workspace(db: Any) -> Any:
    return helpers.make_workspace("other")


# Test-only TASK handlers must be registered before workflows that use them are published.
import tests.handlers  # noqa: E402, F401
