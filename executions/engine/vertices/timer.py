"""TIMER: wait ``seconds`` or ``until`` a time, as a due time in the database (S12)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from executions.core.outcomes import Outcome, succeeded, wait
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from executions.handlers import NonRetryable
from workflows.dsl import ast
from workflows.dsl.paths import is_path_string, resolve

ARMED = "timerDueAt"


def needs(vertex: ast.Timer) -> set[str]:
    return needs_of(vertex.until) if vertex.until and is_path_string(vertex.until) else set()


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Timer, step.vertex)
    if ARMED in step.state:
        return succeeded()
    due = _due(vertex, step)
    if due <= step.db_now:
        return succeeded()
    return wait(due_at=due, reason=f"timer until {due.isoformat()}", state={ARMED: due.isoformat()})


def _due(vertex: ast.Timer, step: Any) -> datetime:
    if vertex.seconds is not None:
        return step.db_now + timedelta(seconds=vertex.seconds)
    value = resolve(str(vertex.until), step.context) if is_path_string(vertex.until) else vertex.until
    try:
        due = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as error:
        raise NonRetryable(f"TIMER until: {value!r} is not an ISO-8601 timestamp") from error
    if due.tzinfo is None:
        raise NonRetryable(f"TIMER until: {value!r} has no UTC offset")
    return due
