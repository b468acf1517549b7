"""WAIT: the step waits — WAITING, holding no worker, no lease and no slot — for a callback
or an event (S27), until its ``timeoutSeconds``; see executions/core/waits.py.

A run returns the wait to register; the drain's commit registers the waits of its whole
batch in one statement with their WAITING transition (fenced, like any result), and resumes
at once a wait whose answer is already there (an event within ``lookbackSeconds``).
Whatever ends the wait (a callback, an operator, an event, the timeout) puts the step back
to READY with the result in its state (``wait``, for that attempt); the next run turns it
into the step's outcome, so a FAILED callback and a timeout follow the retry policy like
any failed attempt, and a retry waits again with a new token.
"""

from __future__ import annotations

from typing import cast

from executions.core import waits
from executions.core.outcomes import Outcome, awaiting
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
    match = tuple((tuple(str(key) for key in parse_path(event_path).segments), resolve(context_path, step.context))
                  for event_path, context_path in vertex.match)
    spec = waits.WaitSpec(step.step_id, step.attempt, step.execution.id, step.execution.workspace_id, vertex.for_,
                          vertex.timeout_seconds, vertex.heartbeat_seconds, str(vertex.event or ""), match,
                          vertex.lookback_seconds)
    reason = f"waiting for event {vertex.event}" if vertex.for_ == "event" else "waiting for a callback"
    return awaiting(reason=reason, wait=spec)
