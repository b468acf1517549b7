"""FAIL: end the execution as FAILED with the vertex's ``error`` (and ``cause``)."""

from __future__ import annotations

from typing import cast

from executions.core.outcomes import Outcome, succeeded
from executions.core.runs import StepRun
from executions.models import ExecutionStatus
from workflows.dsl import ast


def needs(vertex: ast.Fail) -> set[str]:
    return set()


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Fail, step.vertex)
    error = f"{vertex.error}: {vertex.cause}" if vertex.cause else vertex.error
    return succeeded(end=ExecutionStatus.FAILED, error=f"FAIL '{vertex.id}': {error}")
