"""Writes that end or extend a wait for the outside world (S27): a callback (anonymous: its
token is the credential), its heartbeat, an operator completing a waiting callback step, and
an event posted to a workspace. Each is one transaction of executions/core/waits.py; a token
that names nothing, a wait that is over and a second, different completion are 404, 410 and
409, and none of them writes anything."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from executions.core import waits
from executions.models import Execution, Step, StepStatus
from executions.platform import transient
from workflows import sudo
from workflows.errors import Conflict, NotFound

STATUSES = ("SUCCEEDED", "FAILED")


def completion(status: str, output: Any = None, error: str | None = None) -> dict[str, Any]:
    """The stored form of a completion: what a repeat is compared with."""
    if status == "SUCCEEDED":
        return {"status": status, "output": output}
    return {"status": status, "error": error or ""}


def complete_callback(token: str, done: dict[str, Any]) -> waits.Answer:
    """Complete the callback wait of ``token`` (NotFound, Gone, Conflict)."""
    with transaction.atomic(), connection.cursor() as cursor:
        return waits.complete(cursor, token=token, completion=done, by="callback")


def heartbeat(token: str) -> dict[str, Any]:
    """Extend the heartbeat deadline of the callback wait of ``token``."""
    with transaction.atomic(), connection.cursor() as cursor:
        return waits.heartbeat(cursor, token)


def complete_step(execution: Execution, vertex: str, done: dict[str, Any], *, actor: str,
                  system_actor: Any = None) -> waits.Answer:
    """An operator completes (or fails) a step WAITING for a callback — an approval."""
    own, root = (Execution.objects.filter(pk=execution.pk)
                 .values_list("workflow__key", "root__workflow__key").get())
    for key in dict.fromkeys([own, root or own]):  # reserved workflows (S15), as lifecycle's actions
        sudo.require(key, system_actor, "complete steps")
    step = Step.objects.filter(execution=execution, vertex=vertex).only("id", "status").first()
    if step is None:
        raise NotFound(f"execution {execution.pk} has no step '{vertex}'")
    if step.status != StepStatus.WAITING:
        raise Conflict(f"step '{vertex}' is {step.status}, not WAITING for a callback")
    with transaction.atomic(), connection.cursor() as cursor:
        try:
            return waits.complete(cursor, step_id=step.pk, completion=done, by=f"operator {actor}")
        except NotFound:
            raise Conflict(f"step '{vertex}' does not wait for a callback") from None


def post_event(workspace_id: int, name: str, data: Any, key: str | None) -> int:
    """Deliver an event to every step of the workspace that waits for it (see waits.post_event)."""
    def deliver() -> int:
        with transaction.atomic(), connection.cursor() as cursor:
            return waits.post_event(cursor, workspace_id=workspace_id, name=name, data=data, key=key)
    return transient.retrying(deliver)
