"""``bench redelivery``: SIGKILL the worker running the spawner at about 50% of the spawn;
another worker re-claims the step after its lease expires and resumes at the committed
cursor. Reports duplicates (must be 0) and the time to finish after the redelivery
relative to a clean run of the same fan-out."""

from __future__ import annotations

import time
from typing import Any

from bench import fanout
from bench.common import Cluster, reset, wait_until
from executions.models import FanOut, Step
from executions.services import lifecycle as services
from workflows.models import Workspace

LEASE_SECONDS = "2"


def run(items: int, workers: int, *, clean_seconds: float | None = None, timeout: float = 600.0) -> dict[str, Any]:
    clean = clean_seconds if clean_seconds is not None else fanout.run(items, workers)["seconds_total"]
    reset()
    workspace = Workspace.objects.get(slug="default")
    fanout.publish(workspace)
    payload = {"items": list(range(items))}
    cluster = Cluster(workers, SB_LEASE_SECONDS=LEASE_SECONDS, SB_SPAWN_BATCH="500").start()
    try:
        execution = services.start_execution(workspace, workflow="bench-fanout", input=payload,
                                             created_by="bench").execution
        victim, killed_at, cursor_at_kill = _kill_spawner_midway(cluster, execution.pk, items)
        wait_until(lambda: _reclaimed(execution.pk), total=1, label="waiting for redelivery", timeout=60)
        reclaimed_at = time.monotonic()
        wait_until(lambda: fanout.counts(execution.pk), total=items, label="finishing", timeout=timeout)
        finished_at = time.monotonic()
    finally:
        cluster.stop()
    verdict = fanout.verify(execution.pk, items)
    spawner = Step.objects.get(execution=execution, vertex="fanout")
    after = finished_at - reclaimed_at
    return {
        "items": items,
        "workers": workers,
        "killed_pid": victim,
        "cursor_at_kill": cursor_at_kill,
        "spawner_attempts": spawner.attempt,
        "duplicates": verdict["children"] - verdict["distinct_keys"],
        "seconds_detection": round(reclaimed_at - killed_at, 3),
        "seconds_after_redelivery": round(after, 3),
        "seconds_clean_run": round(clean, 3),
        "ratio_to_clean_run": round(after / clean, 3),
        "lease_seconds": float(LEASE_SECONDS),
        **verdict,
        "ok": verdict["ok"] and spawner.attempt == 2 and after <= 0.6 * clean,
    }


def _kill_spawner_midway(cluster: Cluster, execution_id: Any, items: int) -> tuple[int, float, int]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        fan = FanOut.objects.filter(execution_id=execution_id).only("cursor").first()
        if fan is not None and fan.cursor >= items // 2:
            step = Step.objects.get(execution_id=execution_id, vertex="fanout")
            if step.status != "RUNNING":
                raise RuntimeError("the spawner finished before it could be killed; use more items")
            pid = int(step.leased_by.rsplit(":", 1)[1])
            cluster.kill_pid(pid)
            return pid, time.monotonic(), fan.cursor
        time.sleep(0.005)
    raise RuntimeError("the spawner never reached 50%")


def _reclaimed(execution_id: Any) -> tuple[bool, int]:
    step = Step.objects.get(execution_id=execution_id, vertex="fanout")
    again = step.attempt >= 2 and step.status in ("RUNNING", "SUCCEEDED")
    return again, int(again)
