"""WAIT: the step waits — WAITING, holding no worker, no lease and no slot — for a callback
or an event (S27), until its ``timeoutSeconds``; see executions/core/waits.py.

A run registers the wait and commits the step WAITING in one fenced transaction (or, when
the answer is already there — an event within ``lookbackSeconds`` — finishes at once).
Whatever ends the wait (a callback, an operator, an event, the timeout) puts the step back
to READY with the result in its state (``wait``, for that attempt); the next run turns it
into the step's outcome, so a FAILED callback and a timeout follow the retry policy like
any failed attempt, and a retry waits again with a new token.
"""

from __future__ import annotations

from typing import Any, cast

from executions.core import waits
from executions.core.outcomes import Outcome, awaiting, committed, failed, succeeded
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from workflows.dsl import ast
from workflows.dsl.paths import parse_path, resolve


def needs(vertex: ast.Wait) -> set[str]:
    return needs_of([context_path for _, context_path in vertex.match])


def result_of(step: StepRun) -> dict[str, Any] | None:
    """The result of this attempt's wait, once something ended it."""
    result = step.state.get("wait")
    return result if isinstance(result, dict) and result.get("attempt") == step.attempt else None


def outcome_of(completion: dict[str, Any]) -> Outcome:
    """A completion (a callback's body, an operator's, an event's data) as the step's outcome."""
    if completion.get("status") == "SUCCEEDED":
        return succeeded(completion.get("output"))
    return failed(str(completion.get("error") or "the callback reported FAILED"))


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Wait, step.vertex)
    result = result_of(step)
    if result is not None:
        if "timedOut" in result:
            return failed(str(result["timedOut"]))
        return outcome_of(result["result"])
    match = [([str(key) for key in parse_path(event_path).segments], resolve(context_path, step.context))
             for event_path, context_path in vertex.match]
    with step.transaction() as tx:
        if vertex.for_ == "event":
            registered = waits.register_event(
                tx.cursor, step_id=step.step_id, attempt=step.attempt, execution_id=step.execution.id,
                workspace_id=step.execution.workspace_id, name=str(vertex.event), match=match,
                timeout=vertex.timeout_seconds, lookback=vertex.lookback_seconds)
            reason = f"waiting for event {vertex.event}"
        else:
            registered = waits.register_callback(
                tx.cursor, step_id=step.step_id, attempt=step.attempt, execution_id=step.execution.id,
                workspace_id=step.execution.workspace_id, timeout=vertex.timeout_seconds,
                heartbeat=vertex.heartbeat_seconds)
            reason = "waiting for a callback"
        if registered.completion is not None:
            tx.finish(outcome_of(registered.completion))
        else:
            tx.finish(awaiting(reason=reason, due_at=registered.due_at))
    return committed()
