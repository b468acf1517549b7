"""Reads of one execution's steps and events."""

from __future__ import annotations

from collections.abc import Iterable

from executions.models import Event, Execution, Step


def of(execution: Execution) -> list[Step]:
    """Every step of ``execution`` in creation order, with its destination."""
    return list(Step.objects.filter(execution=execution).select_related("destination").order_by("id"))


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
