"""One module per vertex kind. Each exposes

    needs(vertex) -> set[str]   payload names its run reads ("input", or vertex ids)
    run(step: StepRun) -> Outcome

The engine looks a kind up here and never branches on it. Modules are imported on first
use, so vertex modules may use the engine without an import cycle."""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from workflows.dsl import ast

MODULES = {
    "TASK": "task",
    "HTTP": "http",
    "SPAWNER": "spawner",
    "MERGE": "merge",
    "TIMER": "timer",
    "CHOICE": "choice",
    "CHAIN": "chain",
    "SUCCEED": "succeed",
    "FAIL": "fail",
}


@cache
def _module(kind_name: str) -> ModuleType:
    return importlib.import_module(f"executions.vertices.{MODULES[kind_name]}")


def kind(vertex: ast.Vertex) -> ModuleType:
    return _module(vertex.type)
