"""``postgres_restart`` restarts its database server, so it never runs on the one the rest
of the suite shares: here it runs as ``manage.py chaos`` on a separate embedded server in
``.pgdata-fault/`` (or, with DATABASE_URL, only given SB_FAULT_RESTART_COMMAND)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support import ROOT
from tests.support.cluster import manage

FAULT_PGDATA = ROOT / ".pgdata-fault"


@pytest.mark.fault
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_workers_reconnect_and_finish_after_a_postgres_restart():
    args = ["postgres_restart", "--items", "300", "--json", "--pace", "4", "--downtime", "2", "--timeout", "150"]
    if os.environ.get("DATABASE_URL", "").strip():
        command = os.environ.get("SB_FAULT_RESTART_COMMAND", "").strip()
        if not command:
            pytest.skip("DATABASE_URL is set: give SB_FAULT_RESTART_COMMAND (a command restarting a server "
                        "nobody else uses) to run the restart test")
        args += ["--restart-command", command]
    else:
        args += ["--pgdata", str(FAULT_PGDATA)]
    finished = manage("chaos", *args, timeout=280)
    assert finished.stdout.strip(), finished.stderr[-3000:]
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert finished.returncode == 0 and result["ok"], (result["violations"], finished.stderr[-3000:])
    invariants = result["invariants"]
    assert invariants["children"] == invariants["distinct_child_keys"] == invariants["succeeded"] == 300
    assert invariants["non_terminal_executions"] == 0 and invariants["stale_results_committed"] == 0
    assert invariants["merge_status"] == "SUCCEEDED"
    assert result["faults"]["restarts"] == 2
    assert result["faults"]["idle_restart"]["status"] == "SUCCEEDED"


@pytest.mark.fault
@pytest.mark.timeout(120)
def test_the_restart_scenario_refuses_a_database_url_without_a_restart_command():
    finished = manage("chaos", "postgres_restart", "--items", "10",
                      env={**os.environ, "DATABASE_URL": "postgres://nobody@127.0.0.1:9/nothing"}, timeout=100)
    assert finished.returncode != 0
    assert "DATABASE_URL is set, so give --restart-command" in finished.stderr
