"""Reads of one execution's steps and events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from executions.models import Event, Execution, Step, StepStatus
from executions.selectors import waits

# What a READY step due later waits for, from its reason (the first prefix found in it).
TIMED_WAITS = (("timer", "timer"), ("retry backoff", "retry backoff"), ("payload pressure", "payload pressure"),
               ("quota", "quota"), ("maxconcurrency", "fan-out slot"),
               ("throttled by", "destination cooldown"), ("circuit open", "destination circuit open"))


@dataclass(frozen=True)
class Waiting:
    # callback, event, children, signal, timer, retry backoff, payload pressure, quota, fan-out slot, deferred,
    # destination cooldown, destination circuit open (issue 29)
    kind: str
    reason: str
    next_check_at: datetime | None  # when it is looked at again (None: when a signal wakes it)


def waiting(step: Step, now: datetime | None = None) -> Waiting | None:
    """How a step waits, in the operator's terms, or None. A WAITING step waits for a signal
    (a MERGE for its children). A READY step due later waits on a durable timer — a TIMER, a
    retry backoff, a fan-out deferred by payload pressure (S7) — until ``next_check_at``; its
    stored status stays READY (that is how state.py keeps timers), and readers show it as
    WAITING (``display_status``)."""
    outside = getattr(step, "outside_wait", None)  # set by ``of`` (selectors/waits.py)
    if step.status == StepStatus.WAITING and outside is not None:
        return Waiting(outside.kind, outside.text, outside.times_out_at)
    if step.status == StepStatus.WAITING:
        kind = "children" if step.wait_reason.startswith("waiting for children") else "signal"
        return Waiting(kind, step.wait_reason, None)
    if step.status != StepStatus.READY or step.due_at <= (now or timezone.now()):
        return None
    reason = step.wait_reason or "deferred"
    kind = next((k for prefix, k in TIMED_WAITS if prefix in reason.lower()), "deferred")
    # A child held back by its fan-out's maxConcurrency is released by a sibling finishing,
    # not by a clock (records.HELD_UNTIL): it has no next check.
    return Waiting(kind, reason, None if kind == "fan-out slot" else step.due_at)


def display_status(step: Step, now: datetime | None = None) -> str:
    """The status operators see: WAITING for a step that waits (see ``waiting``)."""
    return StepStatus.WAITING if waiting(step, now) is not None else step.status


def of(execution: Execution) -> list[Step]:
    """Every step of ``execution`` in creation order, with its destination and, for a step
    waiting for the outside world, its wait (``outside_wait``: selectors/waits.WaitView)."""
    found = list(Step.objects.filter(execution=execution).select_related("destination").order_by("id"))
    for step_id, view in waits.of_steps(found).items():
        next(step for step in found if step.pk == step_id).outside_wait = view  # type: ignore[attr-defined]  # a read's annotation
    return found


def named(execution: Execution, vertices: Iterable[str]) -> dict[str, Step]:
    """The steps of the given vertices (e.g. the merges of its fan-outs), by vertex: the few
    columns a status badge needs."""
    names = list(vertices)
    if not names:
        return {}
    found = Step.objects.filter(execution=execution, vertex__in=names).only(
        "id", "vertex", "status", "wait_reason", "error", "attempt")
    return {step.vertex: step for step in found}


def events(execution: Execution, *, after: int = 0, limit: int) -> list[Event]:
    """Up to ``limit`` events of ``execution`` (its steps' included) with an id above
    ``after``, oldest first."""
    return list(Event.objects.filter(execution_id=execution.pk, id__gt=after).order_by("id")[:limit])


INPUT_EDITED = "input edited"  # how the event note of a retry with an edited input begins (services.py)


def input_edits(execution: Execution) -> list[Event]:
    """The notes of retries with an edited input, newest first."""
    return list(Event.objects.filter(execution_id=execution.pk, message__startswith=INPUT_EDITED)
                .order_by("-id")[:20])
