"""Reads of one execution's run for its pictures (ui/run_graph.py, ui/timeline.py): its steps'
times and statuses, their status transitions from the event log, and the child workflow
version each fan-out runs.

What is recorded per attempt. A step row keeps its first start (``started_at``), its latest
attempt's start (``attempt_started_at``) and its end (``finished_at``); every status change
of a step — each claim (READY → RUNNING, with the attempt's number), each retry backoff
(RUNNING → READY, attempt + 1), each wait and each end — is an event with the database's
time (state.py writes it in the statement that moves the status). The timeline is drawn
from those events, so past attempts have their times; only a step whose events were left
off (``TRANSITIONS_SHOWN``) is drawn from its row's three times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from executions.models import Event, Execution, FanOut, Step

TRANSITIONS_SHOWN = 2000


@dataclass(frozen=True)
class Transition:
    step_id: int
    from_status: str
    to_status: str
    attempt: int | None
    at: datetime
    message: str


def steps(execution: Execution) -> list[Step]:
    """The execution's steps in creation order: the columns the pictures use."""
    return list(Step.objects.filter(execution=execution).order_by("id").only(
        "id", "vertex", "status", "attempt", "max_attempts", "due_at", "wait_reason", "created_at",
        "started_at", "attempt_started_at", "finished_at"))


def transitions(execution: Execution, limit: int = TRANSITIONS_SHOWN) -> tuple[list[Transition], bool]:
    """The status changes of the execution's steps, oldest first (the ``event_execution``
    index), and whether some were left off (more than ``limit``)."""
    rows = list(Event.objects.filter(execution_id=execution.pk, step_id__isnull=False).exclude(to_status="")
                .order_by("id").values_list("step_id", "from_status", "to_status", "attempt", "created_at",
                                            "message")[: limit + 1])
    return [Transition(*row) for row in rows[:limit]], len(rows) > limit


def child_versions(execution: Execution) -> dict[str, tuple[str, str]]:
    """Spawner vertex → (workflow key, version hash) its children run."""
    rows = FanOut.objects.filter(execution=execution).values_list(
        "spawner_vertex", "target_version__definition__key", "target_version__hash")
    return {vertex: (key, digest) for vertex, key, digest in rows}
