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

from typing import cast

from executions.core import waits
from executions.core.outcomes import Outcome, awaiting, committed
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from workflows.dsl import ast
from workflows.dsl.paths import parse_path, resolve


def needs(vertex: ast.Wait) -> set[str]:
    return needs_of([context_path for _, context_path in vertex.match])


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Wait, step.vertex)
    ended = waits.ended(step.state, step.attempt)
    if ended is not None:
        return ended
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
            tx.finish(waits.outcome_of(registered.completion))
        else:
            tx.finish(awaiting(reason=reason, due_at=registered.due_at))
    return committed()
