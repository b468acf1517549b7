"""End-to-end fixtures: a real ``manage.py qcluster`` subprocess on the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"


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
            "DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings",
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
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def qcluster(transactional_db: Any) -> Iterator[Callable[..., Cluster]]:
    """Start real qclusters on the test database: ``cluster = qcluster(workers=2)``."""
    ensure_tick_schedule()
    started: list[Cluster] = []

    def start(workers: int = 2, **env: str) -> Cluster:
        cluster = Cluster(workers, env).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()


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
