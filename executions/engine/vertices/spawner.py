"""SPAWNER: one durable child execution per item (S1–S8); see executions/fanout/spawn.py."""

from __future__ import annotations

from executions.core.outcomes import Outcome
from executions.core.runs import StepRun
from executions.fanout import spawn as fanout
from workflows.dsl import ast


def needs(vertex: ast.Spawner) -> set[str]:
    """Nothing: the list (and context values in itemInput) are read in SQL, batch by batch."""
    return set()


def run(step: StepRun) -> Outcome:
    return fanout.spawn(step)
