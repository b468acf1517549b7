"""Real ``manage.py`` subprocesses on the test database — a qcluster, the chaos and bench
commands — and polling the database for what they do (never a fixed sleep)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from django.db import connection

from tests.support import ARTIFACTS, ROOT

TEST_SETTINGS = {"DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings"}


def manage(*args: str, env: dict[str, str] | None = None, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py *args`` to completion in the project root (``env`` defaults to ours)."""
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT,
                          env=os.environ.copy() if env is None else env, capture_output=True, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def bench_database(name: str) -> Iterator[dict[str, str]]:
    """The environment for a ``manage.py bench`` run against its own database ``<test db>_<name>``
    (created by the command), which is dropped afterwards."""
    database = f"{connection.settings_dict['NAME']}_{name}"
    env = {**os.environ, **TEST_SETTINGS, "SB_BENCH_DB": database}
    env.pop("SB_DB_NAME", None)
    try:
        yield env
    finally:
        params = connection.get_connection_params()
        params["dbname"] = "postgres"
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def bench_result(*args: str, env: dict[str, str], timeout: float = 280) -> dict[str, Any]:
    """Run ``manage.py bench *args --json``; its JSON object (the command must succeed)."""
    done = manage("bench", *args, "--json", env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ensure_tick_schedule() -> None:
    """Flushes between transactional tests remove the migration's schedule row."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name="schemabridge-tick",
        defaults={"func": "executions.worker.tick", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )


class Cluster:
    """A qcluster subprocess (its own process group, so kill -9 reaches every worker)."""

    def __init__(self, workers: int = 2, extra_env: dict[str, str] | None = None) -> None:
        self.workers = workers
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"qcluster-{os.getpid()}-{time.monotonic_ns()}.log"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            **TEST_SETTINGS,
            "SB_DB_NAME": connection.settings_dict["NAME"],
            "SB_WORKERS": str(self.workers),
            "PYTHONUNBUFFERED": "1",
            "SB_DRAIN_IDLE_SECONDS": "1",
            **self.extra_env,
        }

    def start(self) -> Cluster:
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "qcluster"], cwd=ROOT, env=self.env(),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    def kill(self) -> None:
        """SIGKILL the whole cluster (sentinel, pusher, monitor and every worker)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30.0) -> float:
        """Ask the cluster to stop, as an operator would (SIGTERM to its main process only);
        returns how long it took."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout)
        return time.monotonic() - started

    def stop(self) -> None:
        """End the cluster after a test: SIGKILL the group. (A SIGTERM to every process of
        the group never stops it gracefully: the workers die of it at once and django-q2's
        main process then hangs in ``Event.set``; see docs/operations.md, "Stopping workers".
        ``terminate`` is the graceful stop.)"""
        self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll the database until ``predicate()`` is truthy (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def assert_survived(result: dict[str, Any], items: int) -> dict[str, Any]:
    """Every invariant of a chaos run held (docs/reliability.md); returns the invariants for
    further checks."""
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
