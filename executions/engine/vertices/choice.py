"""CHOICE: continue with the first rule whose condition holds, else ``default``."""

from __future__ import annotations

from typing import Any, cast

from executions.core.outcomes import Outcome, succeeded
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from executions.handlers import NonRetryable
from workflows.dsl import ast, conditions


def needs(vertex: ast.Choice) -> set[str]:
    return needs_of(*[_paths(rule.when) for rule in vertex.choices])


def _paths(condition: Any) -> list[str]:
    if isinstance(condition, dict):
        found = [condition["path"]] if isinstance(condition.get("path"), str) else []
        for key in ("and", "or"):
            for item in condition.get(key) or []:
                found += _paths(item)
        if "not" in condition:
            found += _paths(condition["not"])
        return found
    return []


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Choice, step.vertex)
    for rule in vertex.choices:
        if conditions.evaluate(rule.when, step.context):
            return succeeded(next=rule.next)
    if vertex.default:
        return succeeded(next=vertex.default)
    raise NonRetryable("no choice matched and the CHOICE has no default")
