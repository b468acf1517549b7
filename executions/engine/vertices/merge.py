"""MERGE: join a spawner's children under the failure tolerance (S10); see executions/fanout/merge.py."""

from __future__ import annotations

from executions.core.outcomes import Outcome
from executions.core.runs import StepRun
from executions.fanout import merge as fanout_merge
from workflows.dsl import ast


def needs(vertex: ast.Merge) -> set[str]:
    return set()


def run(step: StepRun) -> Outcome:
    return fanout_merge.merge(step)
