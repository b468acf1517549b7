"""``bench bulk``: a filtered bulk operation over a large fan-out (issue 31 §5: "set-based:
100,000 matched children in one operation without loading them").

``run()`` builds a parent whose SPAWNER fans ``items`` entries out to a one-step child that
fails (``demo.fail_if``, no retries), joined by a MERGE that tolerates every failure — through
the engine (``drive``: a real qcluster in the command, an inline drain in the suite) — so every
child is FAILED with a failed step, as in production. With no worker running, it then times two
operations of ``services/bulk.py``, run in this process (``run_due``, batches of
``SB_BULK_BATCH``) so nothing else competes for the rows:

1. a **retry** of every failed child (``{"status": ["FAILED"]}``): the operation's creation
   (its ledger filled by one ``INSERT … SELECT``) and its run;
2. a **cancel** of what the retry re-opened (``{"status": [<the retried children's statuses>]}``).

Each operation must match every child and finish ``done`` with each child acted on once (its
ledger: ``done`` = ``matched``, nothing skipped), and the children must end as it says.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import connection

from bench import fanout
from bench.common import Cluster, machine_speed, reset, wait_until
from executions.models import BulkOperation, BulkState, Execution, ExecutionStatus
from executions.services import bulk
from executions.services import lifecycle as services
from workflows.models import Plan, Workspace
from workflows.services import publish_version

CHILD = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.fail_if",
                                                "retry": {"maxAttempts": 1}}}}
PARENT = {"start": "fan", "vertices": {
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "bench-bulk-child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan",
             "config": {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 1.0}}},
}}
FAILURE = "ledger unavailable (bench bulk)"
FINISHED = [ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED]


def build(workspace: Workspace, items: int, drive: Callable[[Any, int], object]) -> tuple[Execution, float]:
    """The parent with ``items`` FAILED children (the engine ran them); seconds it took."""
    publish_version(workspace, "bench-bulk-child", CHILD, author="bench")
    publish_version(workspace, "bench-bulk", PARENT, author="bench")
    entries = [{"id": f"entry-{i:06d}", "fail": True, "message": FAILURE} for i in range(items)]
    started = time.monotonic()
    parent = services.start_execution(workspace, workflow="bench-bulk", input={"items": entries},
                                      created_by="bench").execution
    drive(parent.pk, items)
    return parent, time.monotonic() - started


def children_by_status(parent: Any) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT status, count(*) FROM executions_execution WHERE parent_id = %s GROUP BY status",
                       [parent])
        return dict(cursor.fetchall())


def operation(parent: Execution, action: str, terms: dict[str, Any]) -> dict[str, Any]:
    """Create one bulk operation and run it to its end here; its figures."""
    started = time.monotonic()
    created = bulk.start(parent, action, terms, actor="bench")
    create_seconds = time.monotonic() - started
    started = time.monotonic()
    finished = bulk.run_due()
    run_seconds = time.monotonic() - started
    row = BulkOperation.objects.get(pk=created.operation)
    return {
        "filter": terms,
        "matched": created.matched,
        "create_seconds": round(create_seconds, 3),
        "run_seconds": round(run_seconds, 3),
        "children_per_s": round(created.matched / run_seconds, 1) if run_seconds else None,
        "state": row.state, "done": row.done, "skipped": row.skipped, "operations_finished": finished,
    }


def run(items: int, drive: Callable[[Any, int], object]) -> dict[str, Any]:
    """Build the fan-out, time the retry and the cancel (see the module doc)."""
    plan = Plan.objects.create(name=f"bench-bulk-{time.time_ns()}", executions_per_day=items * 3 + 10)
    workspace = Workspace.objects.create(slug=f"bench-bulk-{time.time_ns()}", name="Bulk benchmark", plan=plan)
    parent, built = build(workspace, items, drive)
    failed = children_by_status(parent.pk)
    retry = operation(parent, "retry", {"status": ["FAILED"]})
    reopened = children_by_status(parent.pk)
    open_statuses = sorted(status for status in reopened if status not in FINISHED)
    cancel = operation(parent, "cancel", {"status": open_statuses or ["RUNNING"]})
    after = children_by_status(parent.pk)
    checks = {
        "every child FAILED before": failed == {ExecutionStatus.FAILED: items},
        "retry matched, did every child, skipped none": (retry["matched"], retry["done"], retry["skipped"],
                                                         retry["state"]) == (items, items, 0, BulkState.SUCCEEDED),
        "retry re-opened every child": sum(reopened.get(s, 0) for s in open_statuses) == items,
        "cancel matched, did every child, skipped none": (cancel["matched"], cancel["done"], cancel["skipped"],
                                                          cancel["state"]) == (items, items, 0, BulkState.SUCCEEDED),
        "every child CANCELLED after": after == {ExecutionStatus.CANCELLED: items},
    }
    return {
        "benchmark": "bulk", "items": items, "build_seconds": round(built, 3),
        "batch": bulk.batch_size(), "retry": retry, "cancel": cancel,
        "children": {"before": failed, "after retry": reopened, "after cancel": after},
        "checks": checks, "ok": all(checks.values()),
    }


def on_cluster(items: int, workers: int) -> dict[str, Any]:
    """The command's run: the fan-out built by a qcluster of ``workers`` processes, stopped
    before the operations are timed."""
    reset()
    machine = machine_speed()

    def drive(parent: Any, total: int) -> None:
        cluster = Cluster(workers, sample_memory=False, count_queries=False).start()
        try:
            wait_until(lambda: fanout.counts(parent), total=total, label=f"bulk build {total:,}",
                       timeout=max(600.0, total / 100), interval=0.5)
        finally:
            cluster.stop()

    return {**run(items, drive), "workers": workers, "machine": {"before": machine, "after": machine_speed()}}
