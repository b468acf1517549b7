"""Workflows and the engine, in-process: documents, publishing and starting, running the
engine until nothing is claimable, claims and leases, and reading back what happened."""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from django.db import connection, transaction
from django.db.models import Count

from executions.core import leases
from executions.core.runs import StepRun
from executions.engine import runner as engine
from executions.models import Destination, Execution, Step
from executions.services import lifecycle as services
from executions.worker import Drain, roles
from workflows.models import Workspace
from workflows.services import publish_version

NOOP = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop"}}}
FAIL_IF = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if",
                                            "retry": {"maxAttempts": 1}}}}
# Fails items with ``fail: true`` while tests.support.handlers' flaky switch is on.
FLAKY = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}}}}
# FLAKY behind a wait for items with ``slow: true`` (a TIMER standing in for a slow call), so
# some children are still in flight when a failFast merge fails (make_due passes the wait).
SLOW_OR_FLAKY = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.slow", "equals": True}, "next": "wait"}],
              "default": "call"},
    "wait": {"type": "TIMER", "seconds": 3600, "next": "call"},
    "call": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}},
}}
# The seed article's own MERGE configuration (S10).
SEED_MERGE = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05}, "failFast": True}


# --- workflows ------------------------------------------------------------------------------------

def publish(workspace: Workspace, key: str, doc: dict[str, Any]) -> Any:
    return publish_version(workspace, key, doc, author="test").version


def fanout_doc(child: str = "child", *, items: str = "$.input.items", merge_config: dict[str, Any] | None = None,
               item_input: Any = None) -> dict[str, Any]:
    spawner: dict[str, Any] = {"type": "SPAWNER", "items": items, "workflow": child, "next": "join"}
    if item_input is not None:
        spawner["itemInput"] = item_input
    join: dict[str, Any] = {"type": "MERGE", "spawner": "fan", "next": "done"}
    if merge_config is not None:
        join["config"] = merge_config
    return {"start": "fan", "vertices": {"fan": spawner, "join": join, "done": {"type": "SUCCEED"}}}


def http_doc(destination: str, path: str = "/ok") -> dict[str, Any]:
    """One HTTP call to ``destination`` at ``path``."""
    return {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": destination, "path": path}}}


def waiting_calls(workspace: Any, count: int, **fields: Any) -> Destination:
    """A destination ``api`` (with ``fields``) and ``count`` started one-call executions."""
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9", **fields)
    publish(workspace, "call", http_doc("api"))
    for _ in range(count):
        start(workspace, "call", {})
    return api


def start(workspace: Workspace, workflow: str, data: Any, **kwargs: Any) -> Execution:
    return services.start_execution(workspace, workflow=workflow, input=data, **kwargs).execution


def run_fanout(workspace: Workspace, items: int, *, failing: Collection[int] = (), child: dict[str, Any] = FAIL_IF,
               merge_config: dict[str, Any] | None = None, **start_kwargs: Any) -> Execution:
    """Publish ``child`` and a fan-out ``parent`` over it, start the parent on ``items`` items
    (``{"i": i, "fail": i in failing}``), run the engine and return the parent as it ended."""
    publish(workspace, "child", child)
    publish(workspace, "parent", fanout_doc(merge_config=merge_config))
    entries = [{"i": index, "fail": index in failing} for index in range(items)]
    parent = start(workspace, "parent", {"items": entries}, **start_kwargs)
    run_engine()
    return refresh(parent)


# --- the engine -----------------------------------------------------------------------------------

def run_engine(*, max_seconds: float = 60.0, threads: int = 0, batch: int = 256) -> int:
    """Run the engine in this process until no step is claimable now (timers in the future
    are left waiting). threads=0 runs inline, inside the test's transaction."""
    return Drain(max_seconds=max_seconds, idle_seconds=0.0, threads=threads, batch=batch, linger=False).run()


def drain_in_thread() -> None:
    """A drain with threads (so HTTP steps run on its event loop), on a thread of its own whose
    database connection closes with it, until nothing is claimable now."""
    def run() -> None:
        try:
            Drain(max_seconds=30, idle_seconds=0, threads=2, batch=16, linger=False).run()
        finally:
            connection.close()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()


def in_thread(results: dict[str, Any], name: str, work: Any) -> threading.Thread:
    """Run ``work()`` on a started thread of its own (its database connection closes with it);
    its result, or the exception it raised, goes to ``results[name]`` for the test to check."""
    def body() -> None:
        try:
            results[name] = work()
        except BaseException as error:  # handed to the test
            results[name] = error
        finally:
            connection.close()
    thread = threading.Thread(target=body)
    thread.start()
    return thread


def waiting_for_a_lock(pid: int) -> bool:
    """Whether the database session ``pid`` is waiting for a lock now (pg_stat_activity)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def claim(limit: int = 100, **options: Any) -> list[leases.ClaimedStep]:
    """Claim up to ``limit`` steps in a transaction of their own, as a worker's drain would
    (sharing each destination's limit with the live drains)."""
    with transaction.atomic(), connection.cursor() as cursor:
        return leases.claim(cursor, limit, **{"sharers": roles.SHARERS, **options})


def claim_runs(limit: int = 100) -> list[StepRun]:
    """Claim up to ``limit`` steps and load what running them needs."""
    with transaction.atomic(), connection.cursor() as cursor:
        return engine.load_runs(cursor, leases.claim(cursor, limit))


def commit(results: Any) -> Any:
    """Record the outcomes of claimed runs, as a worker would after running them."""
    with transaction.atomic(), connection.cursor() as cursor:
        return engine.commit(cursor, results)


def expire_lease(step_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_step SET lease_expires_at = now() - interval '1 second' WHERE id = %s",
                       [step_id])


def lose_leases() -> None:
    """Every RUNNING step's worker "died": its lease expired; then the reaper runs."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_step SET lease_expires_at = now() - interval '1 second' "
                       "WHERE status = 'RUNNING'")
    engine.reap()


def make_due(execution: Execution | None = None) -> None:
    """Bring every READY step's due time to now (instead of sleeping in a test)."""
    with connection.cursor() as cursor:
        if execution is None:
            cursor.execute("UPDATE executions_step SET due_at = now() WHERE status = 'READY'")
        else:
            cursor.execute("UPDATE executions_step SET due_at = now() WHERE status = 'READY' AND execution_id = %s",
                           [execution.pk])


# --- reading back ---------------------------------------------------------------------------------

def refresh(execution: Execution) -> Execution:
    return Execution.objects.get(pk=execution.pk)


def step(execution: Execution, vertex: str) -> Step:
    return Step.objects.get(execution=execution, vertex=vertex)


def child_counts(parent: Execution) -> dict[str, int]:
    rows = Execution.objects.filter(parent=parent).values("status").annotate(n=Count("id")).order_by()
    return {row["status"]: row["n"] for row in rows}
