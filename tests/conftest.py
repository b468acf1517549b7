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


# --- when a test times out, say what the database sessions were doing (a lock wait names its
# blocker), so a hang seen only in CI can be explained from CI's output ---

SESSIONS = """
    SELECT pid, pg_blocking_pids(pid), state, wait_event_type, wait_event,
           round(extract(epoch FROM now() - xact_start)::numeric, 1), left(query, 160)
    FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'
    ORDER BY xact_start
"""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and "Timeout" in str(report.longrepr):
        report.sections.append(("database sessions at the timeout", _database_sessions()))
    return report


def _database_sessions() -> str:
    import threading

    import psycopg
    from django.db import connection

    try:
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params["connect_timeout"] = 5
        with psycopg.connect(**params, autocommit=True) as conn:
            rows = conn.execute(SESSIONS).fetchall()
    except Exception as exc:  # a diagnostic must never hide the test's own failure
        return f"(could not read pg_stat_activity: {exc})"
    lines = [f"pid {pid} blocked by {blockers} {state} {kind}:{event} xact {age}s: {query}"
             for pid, blockers, state, kind, event, age, query in rows]
    lines.append("threads: " + ", ".join(t.name for t in threading.enumerate()))
    return "\n".join(lines) or "(no active sessions)"
