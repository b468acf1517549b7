"""``bench fairness`` (issue 30): does a small workspace's work wait behind another's flood?

On a real qcluster: workspace B's 100-item fan-out and one-step execution are timed on the
idle engine first (solo). Then workspace A starts a 200,000-item no-op fan-out (``--sybil``:
50 fan-outs of 4,000); 5 s later B starts the same two again. Reported: B's solo and flooded
times, the p95 time-to-start of B's children's steps, the one-step execution's latency, and
A's children/s in the seconds before B started and while B ran. Targets: B's fan-out within
2x its solo time + 1 s; the one-step execution within 1 s; A's rate with B at least 0.9 of
its rate without — A's whole flood is run twice, alone and with B, and its children/s
compared (a window of a second or two around B's job measures A's spawner's rhythm more
than B's cost)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from bench.common import Cluster, reset, wait_until
from executions.models import Execution
from executions.services import lifecycle as services
from workflows.models import Plan, Workspace
from workflows.services import publish_version

CHILD = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.noop"}}}
PARENT = {"start": "fanout", "vertices": {
    "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": "bench-child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fanout"},
}}
FLOOD_DELAY = 5.0  # seconds between A's start and B's


def _workspaces() -> tuple[Workspace, Workspace]:
    flood = Workspace.objects.get(slug="default")
    plan, _ = Plan.objects.get_or_create(name="bench-small", defaults={"executions_per_day": 1_000_000_000})
    small, _ = Workspace.objects.get_or_create(slug="bench-small", defaults={"name": "bench small", "plan": plan})
    for workspace in (flood, small):
        publish_version(workspace, "bench-child", CHILD, author="bench")
        publish_version(workspace, "bench-fanout", PARENT, author="bench")
    return flood, small


def _finished(ids: list[Any]) -> tuple[bool, int]:
    done = Execution.objects.filter(pk__in=ids, status__in=["SUCCEEDED", "FAILED", "CANCELLED"]).count()
    return done == len(ids), done


def _small_job(workspace: Workspace, items: int) -> dict[str, Any]:
    """B's fan-out and one-step execution, started together; their times to finish."""
    started = time.monotonic()
    fan = services.start_execution(workspace, workflow="bench-fanout", input={"items": list(range(items))},
                                   created_by="bench").execution
    one = services.start_execution(workspace, workflow="bench-child", input={}, created_by="bench").execution
    times: dict[str, float] = {}
    while len(times) < 2:
        for name, execution in (("fanout", fan), ("one_step", one)):
            if name not in times and _finished([execution.pk])[0]:
                times[name] = time.monotonic() - started
        if time.monotonic() - started > 600:
            raise TimeoutError("workspace B's job did not finish in 600 s")
        time.sleep(0.01)
    return {"fanout_seconds": round(times["fanout"], 3), "one_step_seconds": round(times["one_step"], 3),
            "fanout_id": fan.pk}


def _p95_start(fanout_id: Any) -> float:
    """p95 of (step started - step created) over the fan-out's children's steps, seconds."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM s.started_at - s.created_at))
            FROM executions_step s JOIN executions_execution e ON e.id = s.execution_id
            WHERE e.parent_id = %s AND s.started_at IS NOT NULL""", [fanout_id])
        value = cursor.fetchone()[0]
    return round(float(value or 0.0), 3)


# Where B's fan-out spent its time under the flood, from the database's own times (seconds
# since B's root was created): its SPAWNER claimed and done, its children's steps claimed
# (created → claimed, p50/p95/max) and run (claimed → finished, p95: a drain's thread queue,
# then the no-op), the last child done, the MERGE claimed and done.
TIMELINE = """
    WITH r AS (SELECT created_at AS t0 FROM executions_execution WHERE id = %(root)s),
    own AS (SELECT vertex, min(started_at) AS claimed, max(finished_at) AS done FROM executions_step
            WHERE execution_id = %(root)s GROUP BY vertex),
    kids AS (SELECT extract(epoch FROM s.started_at - s.created_at) AS wait,
                    extract(epoch FROM s.finished_at - s.started_at) AS run, s.finished_at
             FROM executions_step s JOIN executions_execution e ON e.id = s.execution_id
             WHERE e.parent_id = %(root)s)
    SELECT extract(epoch FROM f.claimed - r.t0), extract(epoch FROM f.done - r.t0), k.*,
           extract(epoch FROM j.claimed - r.t0), extract(epoch FROM j.done - r.t0)
    FROM r
    LEFT JOIN own f ON f.vertex = 'fanout'
    LEFT JOIN own j ON j.vertex = 'join'
    CROSS JOIN (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY wait), percentile_cont(0.95) WITHIN GROUP
                       (ORDER BY wait), max(wait), percentile_cont(0.95) WITHIN GROUP (ORDER BY run),
                       extract(epoch FROM max(finished_at) - (SELECT t0 FROM r))
                FROM kids) k
"""
TIMELINE_FIELDS = ("spawner_claimed", "spawner_done", "children_claim_p50", "children_claim_p95",
                   "children_claim_max", "children_run_p95", "children_done", "merge_claimed", "merge_done")


def _timeline(root: Any) -> dict[str, float | None]:
    with connection.cursor() as cursor:
        cursor.execute(TIMELINE, {"root": root})
        row = cursor.fetchone()
    return {name: None if value is None else round(float(value), 3)
            for name, value in zip(TIMELINE_FIELDS, row, strict=True)}


def _flood(workspace: Workspace, items: int, shards: int) -> tuple[list[Any], float]:
    """Start A's flood; its roots and when it started."""
    started = time.monotonic()
    per = items // shards
    roots = [services.start_execution(workspace, workflow="bench-fanout", input={"items": list(range(per))},
                                      created_by="bench").execution.pk for _ in range(shards)]
    return roots, started


def _drained(roots: list[Any], started: float, items: int) -> float:
    """Wait for A's flood to end; its children/s."""
    wait_until(lambda: _finished(roots), total=len(roots), label="flood", timeout=max(600.0, items / 50))
    return round(items / (time.monotonic() - started), 1)


def run(items: int, workers: int, *, sybil: bool = False, small_items: int = 100) -> dict[str, Any]:
    reset()
    flood, small = _workspaces()
    cluster = Cluster(workers, sample_memory=False, count_queries=False).start()
    shards = 50 if sybil else 1
    items = items // shards * shards
    try:
        solo = _small_job(small, small_items)
        rate_alone = _drained(*_flood(flood, items, shards), items)
        roots, started = _flood(flood, items, shards)
        time.sleep(max(0.0, FLOOD_DELAY - (time.monotonic() - started)))
        flooded = _small_job(small, small_items)
        rate_with = _drained(roots, started, items)
        p95 = _p95_start(flooded["fanout_id"])
        timeline = {"solo": _timeline(solo["fanout_id"]), "flooded": _timeline(flooded["fanout_id"])}
    finally:
        cluster.stop()
    target = 2 * solo["fanout_seconds"] + 1.0
    ratio = round(rate_with / rate_alone, 3) if rate_alone else None
    return {
        "variant": "sybil" if sybil else "single", "flood_items": items, "flood_fanouts": shards,
        "small_items": small_items, "workers": workers,
        "small_solo_seconds": solo["fanout_seconds"], "small_flooded_seconds": flooded["fanout_seconds"],
        "small_target_seconds": round(target, 3), "small_p95_start_seconds": p95,
        "one_step_solo_seconds": solo["one_step_seconds"], "one_step_flooded_seconds": flooded["one_step_seconds"],
        "flood_children_per_s_alone": rate_alone, "flood_children_per_s_with_small": rate_with,
        "flood_ratio": ratio, "small_timeline": timeline,
        "ok": (flooded["fanout_seconds"] <= target and flooded["one_step_seconds"] <= 1.0
               and ratio is not None and ratio >= 0.9),
    }
