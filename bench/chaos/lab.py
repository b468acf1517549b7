"""The fault lab: where a scenario runs (``Lab``), a real qcluster whose worker processes
can be told apart and killed (``QCluster``), the chaos workflows, and waiting that rides
out database outages."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil
from django.db import InterfaceError, OperationalError, connection

ROOT = Path(__file__).resolve().parents[2]
CHILD_KEY = "chaos-child"
PARENT_KEY = "chaos-fanout"
DESTINATION = "chaos-destination"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

T = TypeVar("T")


class ScenarioError(RuntimeError):
    """The scenario could not inject its fault or the run did not end in time."""


@dataclass
class Lab:
    """Where a scenario runs.

    ``database`` is the database the qcluster subprocesses use (``SB_DB_NAME``), the one this
    process is connected to. ``restart_server(downtime)`` stops the database server, keeps it
    down about ``downtime`` seconds and starts it again (None: this lab cannot restart it).
    """

    database: str
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path = ROOT / "artifacts"
    restart_server: Callable[[float], None] | None = None
    workers: int = 2
    lease_seconds: float = 2.0
    timeout: float = 600.0
    say: Callable[[str], None] = lambda message: None

    def cluster(self, **env: str) -> QCluster:
        return QCluster(self, env).start()


class QCluster:
    """A ``manage.py qcluster`` subprocess in its own process group. Worker processes are
    told apart from the sentinel, pusher and monitor by django-q's own start-up log line
    ("ready for work at <pid>"), which every (re)started worker writes."""

    READY = re.compile(r"ready for work at (\d+)")

    def __init__(self, lab: Lab, env: dict[str, str]) -> None:
        self.lab = lab
        self.env = {
            **os.environ,
            "SB_DB_NAME": lab.database,
            "SB_WORKERS": str(lab.workers),
            "SB_LEASE_SECONDS": f"{lab.lease_seconds:g}",
            "SB_DRAIN_IDLE_SECONDS": "1",
            "LOG_LEVEL": "INFO",
            "SB_Q_LOG_LEVEL": "INFO",  # django-q's "ready for work at <pid>" names the worker processes
            "PYTHONUNBUFFERED": "1",
            **lab.env,
            **env,
        }
        lab.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = lab.log_dir / f"chaos-qcluster-{os.getpid()}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> QCluster:
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(  # noqa: S603 - our own manage.py
                [sys.executable, str(ROOT / "manage.py"), "qcluster"], cwd=ROOT, env=self.env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            self.wait_for_workers(self.lab.workers, timeout=60.0)
        except BaseException:
            self.stop()
            raise
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def workers(self) -> list[int]:
        """Live worker processes (a killed one that is not reaped yet is a zombie: dead)."""
        live = []
        for pid in dict.fromkeys(int(m) for m in self.READY.findall(self.log())):
            try:
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE and self._ours(process):
                    live.append(pid)
            except psutil.NoSuchProcess:
                continue
        return live

    def _ours(self, process: psutil.Process) -> bool:
        try:
            return self.proc is not None and os.getpgid(process.pid) == self.proc.pid
        except ProcessLookupError:
            return False

    def wait_for_workers(self, count: int, *, timeout: float = 30.0, exclude: set[int] | frozenset[int] = frozenset(),
                         ) -> list[int]:
        """Wait until ``count`` workers are alive, none of them in ``exclude``."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ScenarioError(f"the qcluster exited with {self.proc.returncode}; see {self.log_path}")
            live = [pid for pid in self.workers() if pid not in exclude]
            if len(live) >= count:
                return live
            if time.monotonic() > deadline:
                raise ScenarioError(f"{len(live)} of {count} qcluster workers alive after {timeout:g}s; "
                                    f"see {self.log_path}")
            time.sleep(0.05)

    def signal(self, pid: int, sig: int) -> None:
        if not any(pid == worker for worker in self.workers()):
            raise ScenarioError(f"process {pid} is not a live worker of this cluster")
        os.kill(pid, sig)

    def stop(self) -> None:
        """SIGKILL the whole process group: the run is over (or failed), and a graceful stop
        would only add the drains' hand-over time to every scenario."""
        if self.proc is None:
            return
        with suppress(ProcessLookupError):  # the group, even if its first process is gone
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


# --- the database side ----------------------------------------------------------------------

def db(fn: Callable[[], T]) -> T | None:
    """Run a read; during a database outage return None (and drop the broken connection)."""
    try:
        return fn()
    except (OperationalError, InterfaceError):
        connection.close()
        return None


def wait_for(predicate: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``predicate`` (database errors count as "not yet") until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = db(predicate)
        if value:
            return value
        if time.monotonic() > deadline:
            raise ScenarioError(f"timed out after {timeout:g}s waiting for {what}; "
                                f"database sessions then: {db(sessions)}")
        time.sleep(interval)


SESSIONS = """
    SELECT pid, state, wait_event_type, wait_event,
           round(extract(epoch FROM now() - xact_start)::numeric, 1) AS xact_seconds, left(query, 120)
    FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'
    ORDER BY xact_start NULLS LAST
"""


def sessions() -> list[tuple[Any, ...]]:
    """The database's busy sessions (for a timed-out wait's message: who holds what)."""
    return query(SESSIONS)


def query(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def reset() -> None:
    """Empty the engine's tables, and make sure the tick schedule and a roomy quota exist."""
    from django_q.models import Schedule

    from bench.common import reset as reset_tables

    reset_tables()
    Schedule.objects.update_or_create(
        name="schemabridge-tick",
        defaults={"func": "executions.worker.tick", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )


def workspace() -> Any:
    from workflows.models import Plan, Workspace

    plan, _ = Plan.objects.get_or_create(name="default", defaults={"executions_per_day": 1_000_000_000})
    Plan.objects.filter(pk=plan.pk).update(executions_per_day=1_000_000_000)
    found, _ = Workspace.objects.get_or_create(slug="default", defaults={"name": "Default workspace", "plan": plan})
    return found


# --- the chaos workflows -----------------------------------------------------------------------

def child_doc(max_attempts: int, destination: str | None = None) -> dict[str, Any]:
    """One TASK running ``demo.crash_if`` (output: the attempt and worker that ran it)."""
    work: dict[str, Any] = {"type": "TASK", "handler": "demo.crash_if",
                            "retry": {"maxAttempts": max_attempts, "backoffSeconds": 0.1}}
    if destination:
        work["destination"] = destination
    return {"start": "work", "vertices": {"work": work}}


def parent_doc(*, tolerate_failures: int = 0, items: int = 1) -> dict[str, Any]:
    """SPAWNER → MERGE → SUCCEED; the merge tolerates ``tolerate_failures`` failed children."""
    join: dict[str, Any] = {"type": "MERGE", "spawner": "fanout", "next": "done"}
    if tolerate_failures:
        ratio = min(1.0, tolerate_failures / max(items, 1))
        join["config"] = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": ratio}}
    return {"start": "fanout", "vertices": {
        "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": CHILD_KEY, "next": "join"},
        "join": join,
        "done": {"type": "SUCCEED"},
    }}


def items(count: int, *, seconds: float = 0.0, crash: frozenset[int] | set[int] = frozenset()) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        item: dict[str, Any] = {"i": i}
        if seconds:
            item["seconds"] = seconds
        if i in crash:
            item["crash"] = True
        out.append(item)
    return out


def start_fanout(item_list: list[dict[str, Any]], *, max_attempts: int, destination: str | None = None,
                 tolerate_failures: int = 0) -> Any:
    """Publish the chaos workflows and start the fan-out; returns the parent execution id."""
    from executions.services import lifecycle as services
    from workflows.services import publish_version

    space = workspace()
    publish_version(space, CHILD_KEY, child_doc(max_attempts, destination), author="chaos")
    publish_version(space, PARENT_KEY, parent_doc(tolerate_failures=tolerate_failures, items=len(item_list)),
                    author="chaos")
    started = services.start_execution(space, workflow=PARENT_KEY, input={"items": item_list}, created_by="chaos")
    return started.execution.pk


def progress(parent_id: Any) -> tuple[int, int, str]:
    """(spawn cursor, children finished, parent status)."""
    rows = query("""
        SELECT coalesce(f.cursor, 0), coalesce(f.succeeded + f.failed + f.cancelled, 0), e.status
        FROM executions_execution e
        LEFT JOIN executions_fanout f ON f.execution_id = e.id
        WHERE e.id = %s""", [parent_id])
    cursor_at, done, status = rows[0]
    return int(cursor_at), int(done), str(status)


def wait_finished(lab: Lab, parent_id: Any, *, timeout: float | None = None) -> float:
    """Wait for the parent execution to end; returns the seconds waited."""
    started = time.monotonic()
    wait_for(lambda: progress(parent_id)[2] in TERMINAL, timeout=timeout or lab.timeout,
             what="the fan-out to finish", interval=0.1)
    return time.monotonic() - started


def wait_children_done(parent_id: Any, at_least: int, *, timeout: float) -> int:
    """Wait until ``at_least`` children finished; returns how many had."""

    def reached() -> int | None:
        done = progress(parent_id)[1]
        return done if done >= max(at_least, 1) else None

    return wait_for(reached, timeout=timeout, what=f"{at_least:,} children to finish")


def wait_progress(parent_id: Any, fraction: float, total: int, *, timeout: float) -> int:
    """Wait until ``fraction`` of the children finished; returns how many had."""
    return wait_children_done(parent_id, int(total * fraction), timeout=timeout)


def leased_by(step_ids: list[int] | None = None, *, destination: bool | None = None) -> dict[int, int]:
    """RUNNING steps (optionally only these, or only destination steps) → the pid holding them."""
    sql = "SELECT id, leased_by FROM executions_step WHERE status = 'RUNNING' AND leased_by <> ''"
    params: list[Any] = []
    if step_ids is not None:
        sql += " AND id = ANY(%s)"
        params.append(step_ids)
    if destination is not None:
        sql += " AND destination_id IS NOT NULL" if destination else " AND destination_id IS NULL"
    return {int(step_id): int(label.rsplit(":", 1)[1]) for step_id, label in query(sql, params)}
