"""Reads of waits for the outside world (S27): what a waiting step waits for (the execution
view, the API's steps), a waiting callback step's token for its operators, and which
executions have steps waiting (the execution list's filter)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet

from executions.core import waits
from executions.models import Execution, Step, StepStatus, Wait


@dataclass(frozen=True)
class WaitView:
    kind: str  # callback | event
    since: datetime
    times_out_at: datetime
    heartbeat_due_at: datetime | None
    event: str
    match: str  # "deploymentId = \"d-1\"" (paths into the event data, the execution's values)

    @property
    def text(self) -> str:
        """How operators read it."""
        if self.kind == "event":
            return f"Waiting for event {self.event}" + (f" with {self.match}" if self.match else "")
        return "Waiting for a callback"


def of_steps(steps: Iterable[Step]) -> dict[int, WaitView]:
    """The waits of those of ``steps`` that are WAITING for the outside world, by step id."""
    waiting = {step.pk: step for step in steps if step.status == StepStatus.WAITING}
    if not waiting:
        return {}
    found: dict[int, WaitView] = {}
    for wait in Wait.objects.filter(step_id__in=list(waiting)).only(
            "step_id", "attempt", "kind", "created_at", "deadline", "event_name", "match_text", "heartbeat_seconds"):
        step = waiting[wait.step_id]
        if wait.attempt != step.attempt:
            continue
        heartbeat = step.due_at if wait.heartbeat_seconds is not None else None
        found[step.pk] = WaitView(wait.kind, wait.created_at, wait.deadline, heartbeat, wait.event_name,
                                  wait.match_text)
    return found


@dataclass(frozen=True)
class CallbackView:
    url: str
    heartbeat_url: str
    token: str
    waiting_since: datetime
    times_out_at: datetime


def callback(execution: Execution, vertex: str) -> CallbackView | None:
    """The token of the step ``vertex`` while it waits for a callback (None otherwise)."""
    step = Step.objects.filter(execution=execution, vertex=vertex).only("id", "attempt", "status").first()
    if step is None or step.status not in (StepStatus.WAITING, StepStatus.RUNNING):
        return None
    wait = Wait.objects.filter(step_id=step.pk, attempt=step.attempt, kind="callback",
                               completion__isnull=True).first()
    if wait is None:
        return None
    token = waits.token_for(step.pk, step.attempt, wait.nonce)
    url = waits.callback_url(token)
    return CallbackView(url, f"{url}/heartbeat", token, wait.created_at, wait.deadline)



WAITING_FOR = ("callback", "event", "any")  # the execution list's filter


def executions_waiting(workspace_id: int, kind: str) -> QuerySet[Any]:
    """The ids of the workspace's executions with a step WAITING for ``kind`` (callback,
    event, any), for ``Execution.objects.filter(id__in=…)``."""
    rows = Wait.objects.filter(workspace_id=workspace_id, completion__isnull=True, step__status=StepStatus.WAITING,
                               step__attempt=F("attempt"))
    if kind != "any":
        rows = rows.filter(kind=kind)
    return rows.values("execution_id")
