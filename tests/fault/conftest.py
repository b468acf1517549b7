"""Fault-injection fixtures: a ``Lab`` whose real qcluster subprocesses use the test database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from bench.chaos.lab import Lab


@pytest.fixture
def lab(transactional_db: Any) -> Lab:
    """Short leases so that lost work is re-run within seconds; the test settings in the
    cluster; the pytest process is the orchestrator (and never a worker)."""
    return Lab(database=connection.settings_dict["NAME"],
               env={"DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings"},
               workers=2, lease_seconds=2.0, timeout=150.0)


def assert_survived(result: dict[str, Any], items: int) -> dict[str, Any]:
    """Every invariant held (docs/reliability.md); returns the invariants for further checks."""
    assert result["ok"], (result["violations"], result.get("cluster_log"))
    invariants = result["invariants"]
    assert invariants["children"] == invariants["distinct_child_keys"] == items
    assert invariants["duplicate_children"] == 0
    assert invariants["non_terminal_executions"] == 0 and invariants["open_steps"] == 0
    assert invariants["succeeded"] + invariants["failed"] + invariants["cancelled"] == items
    assert invariants["stale_results_committed"] == 0
    assert all(slot["in_use"] == 0 for slot in invariants["destination_slots"])
    assert invariants["step_reexecutions"] <= invariants["reexecution_bound"]
    return invariants
