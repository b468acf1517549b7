"""One module per vertex kind. Each exposes

    needs(vertex) -> set[str]   payload names its run reads ("input", or vertex ids)
    run(step: StepRun) -> Outcome

and, for kinds that may run on the drain's event loop (HTTP, async TASK handlers),

    runs_async(step) -> bool    whether this step does
    async run_async(step) -> Outcome

and this package maps a vertex's kind to its module, so the engine never branches on a
kind. A new kind is a new module here, a line in ``KINDS``, and its AST class in
``workflows/dsl/ast.py`` (``tests/unit/test_vertex_kinds.py`` checks the two agree).
"""

from __future__ import annotations

from types import ModuleType

from executions.core.outcomes import Outcome
from executions.core.runs import StepRun
from executions.engine.vertices import chain, choice, fail, http, merge, spawner, succeed, task, timer, wait
from workflows.dsl import ast

KINDS: dict[str, ModuleType] = {
    "TASK": task,
    "HTTP": http,
    "SPAWNER": spawner,
    "MERGE": merge,
    "TIMER": timer,
    "WAIT": wait,
    "CHOICE": choice,
    "CHAIN": chain,
    "SUCCEED": succeed,
    "FAIL": fail,
}


def needs(vertex: ast.Vertex) -> set[str]:
    result: set[str] = KINDS[vertex.type].needs(vertex)
    return result


def run(step: StepRun) -> Outcome:
    outcome: Outcome = KINDS[step.vertex.type].run(step)
    return outcome


def runs_async(step: StepRun) -> bool:
    """Whether the step runs on the drain's event loop (``run_async``): a kind that offers
    ``runs_async(step)`` says so; every other step runs on a thread (``run``)."""
    decide = getattr(KINDS[step.vertex.type], "runs_async", None)
    return bool(decide is not None and decide(step))


async def run_async(step: StepRun) -> Outcome:
    outcome: Outcome = await KINDS[step.vertex.type].run_async(step)
    return outcome
