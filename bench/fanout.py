"""``bench fanout``: a SPAWNER fans N items out to a child with one no-op TASK, joined by a
MERGE, on a real qcluster with W worker processes; every feature on (events, leases,
fenced commits, merge counters, quota, payload accounting)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from bench.common import Cluster, reset, wait_until
from executions.models import Execution, FanOut, Step
from executions.services import lifecycle as services
from workflows.models import Workspace
from workflows.services import publish_version

CHILD = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.noop"}}}
PARENT = {"start": "fanout", "vertices": {
    "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": "bench-child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fanout"},
}}


def publish(workspace: Workspace) -> None:
    publish_version(workspace, "bench-child", CHILD, author="bench")
    publish_version(workspace, "bench-fanout", PARENT, author="bench")


def counts(execution_id: Any) -> tuple[bool, int]:
    fan = FanOut.objects.filter(execution_id=execution_id).first()
    done = fan.succeeded + fan.failed + fan.cancelled if fan else 0
    finished = Execution.objects.filter(pk=execution_id, status__in=["SUCCEEDED", "FAILED", "CANCELLED"]).exists()
    return finished, done


def verify(execution_id: Any, items: int) -> dict[str, Any]:
    """N children, N distinct keys, every child and the merge succeeded."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT count(*), count(DISTINCT (parent_id, spawn_vertex, item_index)),
                   count(*) FILTER (WHERE status = 'SUCCEEDED')
            FROM executions_execution WHERE parent_id = %s""", [execution_id])
        children, distinct_keys, succeeded = cursor.fetchone()
    merge = Step.objects.get(execution_id=execution_id, vertex="join")
    ok = children == distinct_keys == succeeded == items and merge.status == "SUCCEEDED"
    return {"children": children, "distinct_keys": distinct_keys, "succeeded": succeeded,
            "merge": merge.status, "ok": ok}


def run(items: int, workers: int, *, timeout: float | None = None, profile_queries: bool = False) -> dict[str, Any]:
    reset()
    workspace = Workspace.objects.get(slug="default")
    publish(workspace)
    payload = {"items": list(range(items))}
    cluster = Cluster(workers).start()
    try:
        queries_before = cluster.queries()
        started = time.monotonic()
        execution = services.start_execution(workspace, workflow="bench-fanout", input=payload,
                                             created_by="bench").execution
        # 10 ms an item at the least (1,000,000 items: under three hours on a loaded machine).
        limit = timeout if timeout is not None else max(600.0, items / 100)
        wait_until(lambda: counts(execution.pk), total=items, label=f"fanout {items:,}", timeout=limit)
        seconds_total = time.monotonic() - started
        time.sleep(1.5)  # let idle workers flush their statement counts
        queries = cluster.queries() - queries_before
        peak = cluster.peak_rss_mb()
        profile = cluster.query_profile() if profile_queries else None
    finally:
        cluster.stop()
    spawner = Step.objects.get(execution=execution, vertex="fanout")
    assert spawner.started_at and spawner.finished_at  # noqa: S101 - verify() below fails the run otherwise
    result: dict[str, Any] = {
        "items": items,
        "workers": workers,
        "seconds_total": round(seconds_total, 3),
        "seconds_spawn": round((spawner.finished_at - spawner.started_at).total_seconds(), 3),
        "children_per_s": round(items / seconds_total, 1),
        "peak_rss_mb": peak,
        "queries_per_child": round(queries / items, 3) if items else 0.0,
    }
    result.update(verify(execution.pk, items))
    if profile is not None:
        result["db_time_by_statement"] = profile
    return result
