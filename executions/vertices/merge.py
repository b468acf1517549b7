"""MERGE: join a spawner's children under the failure tolerance (S10); see executions/fanout.py."""

from __future__ import annotations

from typing import Any

from executions import fanout
from executions.outcomes import Outcome
from workflows.dsl import ast


def needs(vertex: ast.Merge) -> set[str]:
    return set()


def run(step: Any) -> Outcome:
    return fanout.merge(step)
