"""Shared machinery for the benchmarks: a dedicated database, a real qcluster with memory
sampling, and waiting with a progress bar on stderr."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import psutil

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("SB_BENCH_DB", "schemabridge_bench")

# The worker registry too: the previous run's cluster was SIGKILLed, and its registrations
# would count as drain slots until their TTL (30 s) passed.
ENGINE_TABLES = [
    "executions_event", "executions_payload", "executions_payloadusage", "executions_fanout",
    "executions_destinationcall", "executions_step", "executions_execution", "executions_quotausage",
    "executions_workerprocess", "executions_wait", "executions_externalevent", "executions_fairshare",
    "executions_fairclock", "django_q_ormq", "django_q_task",
]


def in_database(name: str) -> bool:
    return os.environ.get("SB_DB_NAME") == name


def in_bench_database() -> bool:
    return in_database(BENCH_DB)


def ensure_database(name: str, conninfo: str | None = None) -> None:
    """Create database ``name`` if it does not exist, on the configured server or, given
    ``conninfo`` (of a maintenance database such as ``postgres``), on that server."""
    import psycopg
    from psycopg import errors, sql

    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if conninfo is not None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
                with contextlib.suppress(errors.DuplicateDatabase):
                    conn.execute(statement)
        return
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if cursor.fetchone() is None:
            with contextlib.suppress(errors.DuplicateDatabase):
                cursor.execute(statement.as_string(cursor.connection))


def reexec_in_database(name: str, argv: list[str], *, env: dict[str, str] | None = None,
                       conninfo: str | None = None) -> NoReturn:
    """Create and migrate database ``name`` (on the configured server, or the one at
    ``conninfo``), then re-run this command against it with ``SB_DB_NAME`` and ``env`` set, so
    benchmarks and fault scenarios never touch the main database's data."""
    ensure_database(name, conninfo)
    full_env = {**os.environ, **(env or {}), "SB_DB_NAME": name}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=full_env, check=True, cwd=ROOT)  # noqa: S603
    os.execve(sys.executable, [sys.executable, str(ROOT / "manage.py"), *argv], full_env)  # noqa: S606 - re-run ourselves


def reexec_in_bench_database(argv: list[str]) -> None:
    """Create and migrate the benchmark database on the configured server, then re-run this
    command against it (benchmarks never touch the main database's data)."""
    reexec_in_database(BENCH_DB, argv)


def reset() -> None:
    """Empty the engine's tables so every run starts from the same state."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(ENGINE_TABLES)} RESTART IDENTITY CASCADE")  # constant names
        cursor.execute("INSERT INTO executions_drainkick (id, last_enqueued_at) VALUES (1, now()) "
                       "ON CONFLICT (id) DO NOTHING")
    from workflows.models import Plan

    Plan.objects.filter(name="default").update(executions_per_day=1_000_000_000)


class Cluster:
    """A ``manage.py qcluster`` subprocess with its own process group, and a sampler of the
    resident memory of each of its processes."""

    def __init__(self, workers: int, *, sample_memory: bool = True, count_queries: bool = True, **env: str) -> None:
        """``sample_memory`` and ``count_queries`` cost CPU on the measured machine (a process
        tree walk every 50 ms; a timer around every statement): a benchmark that reports
        neither turns them off."""
        self.workers = workers
        self.query_dir = tempfile.mkdtemp(prefix="sb-bench-queries-")
        self.sample_memory = sample_memory
        self.env = {**os.environ, "SB_WORKERS": str(workers), "LOG_LEVEL": "WARNING", "SB_DRAIN_IDLE_SECONDS": "2",
                    **({"SB_COUNT_QUERIES_DIR": self.query_dir} if count_queries else {}), **env}
        self.proc: subprocess.Popen[bytes] | None = None
        self.peak_rss: dict[int, int] = {}
        self._sampling = False
        self._sampler: threading.Thread | None = None

    def start(self) -> Cluster:
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, str(ROOT / "manage.py"), "qcluster"], cwd=ROOT, env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        self._sampling = self.sample_memory
        if self.sample_memory:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        self.wait_ready()
        return self

    def processes(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Ready when the worker processes exist and have imported Django (RSS has grown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.processes()) >= self.workers + 3:
                time.sleep(1.0)  # let the workers finish booting before the clock starts
                return
            time.sleep(0.1)
        raise RuntimeError("the qcluster did not start")

    def _sample(self) -> None:
        while self._sampling:
            for process in self.processes():
                try:
                    rss = process.memory_info().rss
                except psutil.Error:
                    continue
                self.peak_rss[process.pid] = max(self.peak_rss.get(process.pid, 0), rss)
            time.sleep(0.05)

    def worker_pids(self) -> list[int]:
        """The processes that run tasks (children of the sentinel that are not pusher/monitor
        cannot be told apart by name, so: every process but the root)."""
        return [p.pid for p in self.processes()[1:]]

    def peak_rss_mb(self) -> float:
        return round(max(self.peak_rss.values(), default=0) / 2**20, 1)

    def queries(self) -> int:
        from bench import instrumentation

        return int(sum(count for count, _ in instrumentation.read(self.query_dir).values()))

    def query_profile(self, top: int = 12) -> list[dict[str, Any]]:
        """Database time by statement shape, largest first (for docs/performance.md)."""
        from bench import instrumentation

        totals = instrumentation.read(self.query_dir)
        ranked = sorted(totals.items(), key=lambda item: -item[1][1])[:top]
        return [{"statement": key, "calls": int(count), "seconds": round(seconds, 3)}
                for key, (count, seconds) in ranked]

    def kill_pid(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        self._sampling = False
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        shutil.rmtree(self.query_dir, ignore_errors=True)


def progress(label: str, done: int, total: int, started: float) -> None:
    width = 30
    fraction = done / total if total else 1.0
    bar = "#" * int(width * fraction) + "-" * (width - int(width * fraction))
    sys.stderr.write(f"\r{label} [{bar}] {done:,}/{total:,} {time.monotonic() - started:6.1f}s")
    sys.stderr.flush()


def wait_until(check: Callable[[], tuple[bool, int]], *, total: int, label: str, timeout: float,
               interval: float = 0.05) -> float:
    """Poll ``check() -> (finished, done_count)`` with a progress bar; returns seconds waited."""
    started = shown = time.monotonic()
    while True:
        finished, done = check()
        if finished or time.monotonic() - shown > 0.5:
            shown = time.monotonic()
            progress(label, done, total, started)
        if finished:
            sys.stderr.write("\n")
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            sys.stderr.write("\n")
            raise TimeoutError(f"{label}: not finished after {timeout:g}s ({done:,}/{total:,})")
        time.sleep(interval)


def machine_speed(repeat: int = 3) -> dict[str, float]:
    """How fast this machine is right now, by two fixed workloads (best of ``repeat``): the
    interpreter (``python_ms``: dicts, strings, JSON and UUIDs, as the engine's own code) and
    PostgreSQL (``database_ms``: one aggregate over a generated series). Benchmark figures
    from different machines, or from one machine under different neighbours, compare only
    through these: the same engine has run at 1,400 and 3,800 calls/s on two machines of the
    same kind (docs/performance-log.md, "Eighth pass")."""
    import json
    import uuid

    from django.db import connection

    def interpreter() -> None:
        for n in range(20_000):
            row = {"id": n, "key": f"item-{n}", "status": "READY", "token": str(uuid.UUID(int=n))}
            json.loads(json.dumps(row))

    def database() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM generate_series(1, 1000000)")
            cursor.fetchone()

    def best(work: Callable[[], None]) -> float:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            work()
            times.append(time.perf_counter() - started)
        return round(1000 * min(times), 1)

    return {"python_ms": best(interpreter), "database_ms": best(database)}


class CpuSampler:
    """Where the machine's CPU goes during a benchmark: every ``interval`` seconds, the CPU
    seconds used so far by the worker cluster, by PostgreSQL's processes, by the benchmark's
    far end (``server_pid``), and by the whole machine. ``per_unit`` spreads what was used
    between two monotonic times over a count of units (calls): when the cores are the limit,
    CPU per call is a steadier figure than calls per second, which moves with everything
    else the machine does."""

    def __init__(self, cluster: Cluster, server_pid: int | None = None, interval: float = 0.5) -> None:
        self.cluster, self.server_pid, self.interval = cluster, server_pid, interval
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._running = False
        self._thread: threading.Thread | None = None
        self._seen: dict[int, tuple[str, float]] = {}  # pid -> (group, cpu seconds at its last sample)

    def start(self) -> CpuSampler:
        self._running = True
        self._thread = threading.Thread(target=self._sample_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._running = False
        if self._thread is not None:
            self._thread.join()

    def _group(self, process: psutil.Process, workers: set[int]) -> str | None:
        if process.pid in workers:
            return "workers"
        if process.pid == self.server_pid:
            return "server"
        if process.name() == "postgres":
            return "database"
        return None

    def _sample(self) -> tuple[float, dict[str, float]]:
        workers = {process.pid for process in self.cluster.processes()}
        for process in psutil.process_iter():
            try:
                group = self._group(process, workers)
                if group is not None:
                    times = process.cpu_times()
                    self._seen[process.pid] = (group, times.user + times.system)
            except psutil.Error:
                continue  # gone: its last sample still counts
        totals = {"workers": 0.0, "database": 0.0, "server": 0.0}
        for group, seconds in self._seen.values():
            totals[group] += seconds
        machine = psutil.cpu_times()
        totals["machine"] = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        return time.monotonic(), totals

    def _sample_forever(self) -> None:
        while self._running:
            self.samples.append(self._sample())
            time.sleep(self.interval)
        self.samples.append(self._sample())

    def _at(self, when: float) -> dict[str, float]:
        """The counters interpolated at monotonic time ``when``."""
        before = [s for s in self.samples if s[0] <= when]
        after = [s for s in self.samples if s[0] >= when]
        if not before or not after:
            return (before or after)[-1 if before else 0][1]
        (t0, a), (t1, b) = before[-1], after[0]
        share = 0.0 if t1 == t0 else (when - t0) / (t1 - t0)
        return {key: a[key] + (b[key] - a[key]) * share for key in a}

    def per_unit(self, start: float, end: float, units: int) -> dict[str, float]:
        """CPU milliseconds per unit between ``start`` and ``end``, by group (``rest``: the
        machine's other processes), and ``cores_busy``: the cores in use on average."""
        if units <= 0 or end <= start or len(self.samples) < 2:
            return {}
        first, last = self._at(start), self._at(end)
        used = {key: last[key] - first[key] for key in first}
        used["rest"] = max(0.0, used["machine"] - used["workers"] - used["database"] - used["server"])
        figures = {key: round(1000 * used[key] / units, 3) for key in ("workers", "database", "server", "rest")}
        figures["total"] = round(1000 * used["machine"] / units, 3)
        figures["cores_busy"] = round(used["machine"] / (end - start), 2)
        return figures
