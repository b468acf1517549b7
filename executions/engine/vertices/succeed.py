"""SUCCEED: end the execution successfully. Its output is the rendered ``output`` template,
or (without one) the output of the vertex that led here."""

from __future__ import annotations

from typing import cast

from executions.core.outcomes import NO_OUTPUT, Outcome, succeeded
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from executions.models import ExecutionStatus
from workflows.dsl import ast
from workflows.dsl.paths import render


def needs(vertex: ast.Succeed) -> set[str]:
    return needs_of(vertex.output)


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Succeed, step.vertex)
    if vertex.output is None:
        return succeeded(NO_OUTPUT, end=ExecutionStatus.SUCCEEDED, output_vertex=step.claimed.prev_vertex or vertex.id)
    return succeeded(render(vertex.output, step.context), end=ExecutionStatus.SUCCEEDED, output_vertex=vertex.id)
