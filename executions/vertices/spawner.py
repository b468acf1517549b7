"""SPAWNER: one durable child execution per item (S1–S8); see executions/fanout.py."""

from __future__ import annotations

from typing import Any

from executions import fanout
from executions.outcomes import Outcome
from workflows.dsl import ast


def needs(vertex: ast.Spawner) -> set[str]:
    """Nothing: the list (and context values in itemInput) are read in SQL, batch by batch."""
    return set()


def run(step: Any) -> Outcome:
    return fanout.spawn(step)
