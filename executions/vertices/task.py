"""TASK: call a registered Python handler with the rendered ``input``."""

from __future__ import annotations

from typing import cast

from executions.handlers import HandlerContext, NonRetryable, registry
from executions.outcomes import NO_OUTPUT, Outcome, succeeded
from executions.runs import StepRun
from executions.vertices.common import needs_of
from workflows.dsl import ast
from workflows.dsl.paths import render


def needs(vertex: ast.Task) -> set[str]:
    return needs_of(vertex.input)


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Task, step.vertex)
    handler = registry.get(vertex.handler)
    if handler is None:
        raise NonRetryable(f"no TASK handler is registered as '{vertex.handler}' on this worker")
    if vertex.destination and step.destination is None:
        raise NonRetryable(f"no destination named '{vertex.destination}' in this workspace")
    data = render(vertex.input, step.context)
    context = HandlerContext(str(step.execution.id), vertex.id, step.attempt, step.idempotency_key)
    output = handler(data, context)
    return succeeded(NO_OUTPUT if output is None else output)
