"""The embedded PostgreSQL: two processes starting it at once share one server, and a process
killed while pgserver rewrote its bookkeeping does not stop the next ones from starting."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from schemabridge_site import embedded_db
from tests.support import ROOT

START = "from pathlib import Path; from schemabridge_site import embedded_db as e; " \
        "s = e.ensure_running(Path({path!r})); print(s.socket_dir, s.port)"


@pytest.mark.timeout(180)
def test_two_processes_starting_at_once_share_one_server(tmp_path):
    data = tmp_path / "pg"
    procs = [subprocess.Popen([sys.executable, "-c", START.format(path=str(data))], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outputs = [proc.communicate(timeout=150) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], outputs
        assert outputs[0][0] == outputs[1][0], "both processes must reach the same server"
        server = embedded_db.ensure_running(data)
        with psycopg.connect(server.conninfo(), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
                                ).fetchone() == (1,)
            assert conn.execute("SELECT current_setting('max_connections')").fetchone() == ("300",)
        assert (data / "PG_VERSION").exists()
        # A process killed while pgserver rewrote its list of handles left it empty: the next
        # processes must still start (they failed with a JSONDecodeError, every one of them).
        (data / ".handle_pids.json").write_text("")
        again = subprocess.run([sys.executable, "-c", START.format(path=str(data))], cwd=ROOT,
                               capture_output=True, text=True, timeout=150)
        assert again.returncode == 0 and again.stdout == outputs[0][0], again.stderr[-2000:]
        assert isinstance(json.loads((data / ".handle_pids.json").read_text()), list)
        assert embedded_db.stop(data)
        restarted = embedded_db.ensure_running(data)  # in the same process: the handle is not stale
        with psycopg.connect(restarted.conninfo(), autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        embedded_db.stop(data)
    assert not embedded_db.stop(data), "stopped: a second stop finds nothing running"
