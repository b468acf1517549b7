"""FAIL: end the execution as FAILED with the vertex's ``error`` (and ``cause``)."""

from __future__ import annotations

from typing import Any

from executions.models import ExecutionStatus
from executions.outcomes import Outcome, succeeded
from workflows.dsl import ast


def needs(vertex: ast.Fail) -> set[str]:
    return set()


def run(step: Any) -> Outcome:
    vertex: ast.Fail = step.vertex
    error = f"{vertex.error}: {vertex.cause}" if vertex.cause else vertex.error
    return succeeded(end=ExecutionStatus.FAILED, error=f"FAIL '{vertex.id}': {error}")
