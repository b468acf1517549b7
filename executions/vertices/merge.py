"""MERGE: join a spawner's children under the failure tolerance (S10); see executions/fanout.py."""

from __future__ import annotations

from executions import fanout
from executions.outcomes import Outcome
from executions.runs import StepRun
from workflows.dsl import ast


def needs(vertex: ast.Merge) -> set[str]:
    return set()


def run(step: StepRun) -> Outcome:
    return fanout.merge(step)
