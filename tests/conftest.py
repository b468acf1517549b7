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


# --- the duration of each test layer, printed at the end of every run (CI's output keeps it) ---

_LAYER_SECONDS: dict[str, float] = {}
_LAYER_TESTS: dict[str, int] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = report.nodeid.split("/")
    layer = parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"
    _LAYER_SECONDS[layer] = _LAYER_SECONDS.get(layer, 0.0) + report.duration  # setup, call and teardown
    if report.when == "call":
        _LAYER_TESTS[layer] = _LAYER_TESTS.get(layer, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _LAYER_SECONDS:
        return
    terminalreporter.section("time per test layer")
    for layer, seconds in sorted(_LAYER_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{layer:12} {seconds:8.1f} s  {_LAYER_TESTS.get(layer, 0):5} tests")
