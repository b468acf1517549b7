"""Reads for executions: lineage, steps, fan-out progress, payloads (the UI's long-tail
latency is in executions/ui/queries.py).

Everything here is indexed and bounded: counts come from FanOut counters and a grouped
count over the (parent, status) index, children are paginated, percentiles are computed in
PostgreSQL — a 100,000-child execution costs the same few queries as a small one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions import merge_rule, payloads
from executions.models import Event, Execution, FanOut, Step


@dataclass
class FanOutView:
    spawner_vertex: str
    merge_vertex: str | None
    total: int
    created: int
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    never_started: int
    spawn_complete: bool
    explanation: str
    fail_fast: bool
    allowed_failures: int
    max_failure_ratio: float
    tolerated: list[str]

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def percent(self) -> float:
        return 100.0 * self.finished / self.total if self.total else 100.0

    def counts(self) -> dict[str, int]:
        return {"PENDING": self.pending, "RUNNING": self.running, "SUCCEEDED": self.succeeded,
                "FAILED": self.failed, "CANCELLED": self.cancelled, "NEVER_STARTED": self.never_started}


ACTIVE_CHILDREN = """
    SELECT spawned_by_id, status, count(*) FROM executions_execution
    WHERE parent_id = %(parent)s AND status IN ('PENDING', 'RUNNING')
    GROUP BY spawned_by_id, status
"""


def fanouts(execution: Execution) -> list[FanOutView]:
    rows = list(FanOut.objects.filter(execution=execution).order_by("created_at"))
    if not rows:
        return []
    with connection.cursor() as cursor:
        cursor.execute(ACTIVE_CHILDREN, {"parent": execution.pk})
        active = {(step_id, status): n for step_id, status, n in cursor.fetchall()}
    views = []
    for f in rows:
        data = {field.attname: getattr(f, field.attname) for field in f._meta.concrete_fields}
        views.append(FanOutView(
            spawner_vertex=f.spawner_vertex, merge_vertex=f.merge_vertex, total=f.total, created=f.created,
            pending=active.get((f.step_id, "PENDING"), 0), running=active.get((f.step_id, "RUNNING"), 0),
            succeeded=f.succeeded, failed=f.failed, cancelled=f.cancelled, never_started=f.total - f.created,
            spawn_complete=f.spawn_complete, explanation=merge_rule.explain(data), fail_fast=f.fail_fast,
            allowed_failures=f.allowed_failures, max_failure_ratio=f.max_failure_ratio,
            tolerated=[s for s, on in (("FAILED", f.tolerates_failed), ("CANCELLED", f.tolerates_cancelled)) if on],
        ))
    return views


def progress_line(execution: Execution) -> str:
    """One line for a terminal: status, current steps, fan-out progress."""
    steps = Step.objects.filter(execution=execution).exclude(status__in=["SUCCEEDED"]).order_by("id")
    parts = [f"{execution.status}"]
    for step in steps:
        extra = f" ({step.wait_reason})" if step.wait_reason else ""
        parts.append(f"{step.vertex}:{step.status}{extra}")
    for view in fanouts(execution):
        parts.append(f"{view.spawner_vertex}: {view.finished:,}/{view.total:,} done "
                     f"({view.succeeded:,} ok, {view.failed:,} failed)")
    return " | ".join(parts)


def lineage(execution: Execution) -> list[Execution]:
    """Ancestors from the root down to the parent."""
    chain = []
    current = execution.parent
    while current is not None:
        chain.append(current)
        current = current.parent
    return list(reversed(chain))


def steps(execution: Execution) -> list[Step]:
    return list(Step.objects.filter(execution=execution).select_related("destination").order_by("id"))


def events(execution: Execution, *, after_id: int = 0, limit: int = 200) -> list[Event]:
    return list(Event.objects.filter(execution_id=execution.pk, id__gt=after_id).order_by("id")[:limit])


def output_of(execution: Execution) -> Any:
    if not execution.output_vertex:
        return None
    with connection.cursor() as cursor:
        found = payloads.load(cursor, [(execution.pk, execution.output_vertex)])
    return found.get((execution.pk, execution.output_vertex))


def input_of(execution: Execution) -> Any:
    with connection.cursor() as cursor:
        found = payloads.load(cursor, [(execution.pk, payloads.INPUT)])
    return found.get((execution.pk, payloads.INPUT))
