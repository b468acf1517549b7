"""``bench steps``: what one HTTP child costs a drain, phase by phase, in this process.

``bench destination`` measures the whole machine, whose speed moves by more than the
changes one wants to see (docs/performance-log.md, "Eighth pass"). This one runs the same
child — a fan-out of N children that each POST once to a loopback server answering at once
— through the drain's own functions, one phase at a time, on one thread and one database
connection: the spawn (the SPAWNER step), then batches of claims (``leases.claim`` and
``engine.load_runs``), calls (``engine.execute_async`` on an event loop) and commits (what
``worker.Drain`` commits: results, call log, fan-out counts). For each phase it reports the
microseconds per child of this thread's CPU (``python_us``) and of its PostgreSQL backend's
(``database_us``, from the backend's CPU times: ticks of 10 ms, so use a few thousand items).
No cluster, no slots shared with another drain, no interpreter lock contended.

Under ``valgrind --tool=callgrind`` the worker side is counted in instructions, which do not
move with the machine's speed: the difference between two sizes, divided by the difference
in items, is the worker's instructions per child (docs/performance-log.md, "Ninth pass").
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psutil
from django.db import connection, transaction

from bench import destination as destination_bench
from bench.common import reset
from bench.latency_server import LatencyServer
from executions.core import calls as call_log
from executions.core import leases, state
from executions.core.outcomes import Outcome
from executions.core.runs import StepRun
from executions.destinations import outbound
from executions.engine import runner as engine
from executions.models import Destination, Execution
from executions.services import lifecycle as services
from workflows.models import Workspace

BATCH = 200  # steps per claim and per commit: about what a drain moves per turn at a limit of 256
PHASES = ("spawn", "claim", "call", "commit")


class _Clock:
    """This thread's CPU and its database backend's, in seconds."""

    def __init__(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.backend = psutil.Process(cursor.fetchone()[0])

    def now(self) -> tuple[float, float]:
        times = self.backend.cpu_times()
        return time.thread_time(), times.user + times.system


def run(items: int) -> dict[str, Any]:
    reset()
    workspace = Workspace.objects.get(slug="default")
    server = LatencyServer(0.0).start()
    try:
        Destination.objects.filter(workspace=workspace, name="bench-api").delete()
        # A limit no batch reaches: claims count slots as at a limit of 256, none waits for one.
        Destination.objects.create(workspace=workspace, name="bench-api", base_url=server.url, timeout_seconds=30,
                                   concurrency_limit=100_000)
        destination_bench.publish(workspace)
        parent = services.start_execution(workspace, workflow="bench-destination", input={"items": list(range(items))},
                                          created_by="bench").execution
        clock = _Clock()
        spent = {phase: [0.0, 0.0] for phase in PHASES}
        _spawn(clock, spent)
        succeeded = _drain(clock, spent)
    finally:
        server.stop()
    parent.refresh_from_db()
    figures = {phase: {"python_us": round(1e6 * py / items, 1), "database_us": round(1e6 * db / items, 1)}
               for phase, (py, db) in spent.items()}
    return {"items": items, "batch": BATCH, **figures,
            "total_us": round(sum(f["python_us"] + f["database_us"] for f in figures.values()), 1),
            "succeeded": succeeded, "children": Execution.objects.filter(parent=parent).count(),
            "ok": succeeded == items}


def _timed(clock: _Clock, spent: dict[str, list[float]], phase: str, since: tuple[float, float]) -> tuple[float, float]:
    now = clock.now()
    spent[phase][0] += now[0] - since[0]
    spent[phase][1] += now[1] - since[1]
    return now


def _spawn(clock: _Clock, spent: dict[str, list[float]]) -> None:
    """Claim the SPAWNER step and run it to the end of its list, then commit it."""
    with transaction.atomic(), connection.cursor() as cursor:
        runs = engine.load_runs(cursor, leases.claim(cursor, 1, plain_limit=1, destination_limit=0))
    start = clock.now()
    outcome = engine.execute(runs[0])
    with transaction.atomic(), connection.cursor() as cursor:
        engine.commit(cursor, [(runs[0], outcome)])
    _timed(clock, spent, "spawn", start)


def _drain(clock: _Clock, spent: dict[str, list[float]]) -> int:
    """Claim, call and commit the children's HTTP steps in batches; returns how many succeeded."""
    loop = asyncio.new_event_loop()
    succeeded = 0
    try:
        while True:
            mark = clock.now()
            with transaction.atomic(), connection.cursor() as cursor:
                claimed = leases.claim(cursor, BATCH, plain_limit=0, destination_limit=BATCH)
                runs = engine.load_runs(cursor, claimed)
            mark = _timed(clock, spent, "claim", mark)
            if not runs:
                return succeeded
            outcomes = loop.run_until_complete(_call(runs))
            mark = _timed(clock, spent, "call", mark)
            _commit(list(zip(runs, outcomes, strict=True)))
            _timed(clock, spent, "commit", mark)
            succeeded += sum(outcome.kind == "succeeded" for outcome in outcomes)
    finally:
        loop.run_until_complete(_close())
        loop.close()


async def _call(runs: list[StepRun]) -> list[Outcome]:
    return list(await asyncio.gather(*(engine.execute_async(run) for run in runs)))


async def _close() -> None:
    await outbound.close_async_clients()


def _commit(results: list[tuple[StepRun, Outcome]]) -> None:
    """As ``executions.worker.commits.commit_once`` commits a batch (no queued steps take slots over here)."""
    calls = [row for run, _ in results for row in run.extra.get("calls", ())]
    counts = state.FanoutCounts()
    with transaction.atomic(), connection.cursor() as cursor:
        engine.commit(cursor, results, counts=counts)
        call_log.record_calls(calls, cursor=cursor)
        counts.apply(cursor)
