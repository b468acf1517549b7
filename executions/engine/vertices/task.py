"""TASK: call a registered Python handler with the rendered ``input``. A plain function runs
on a worker thread; an ``async def`` handler runs on the drain's event loop (``run_async``)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, cast

from executions.core.outcomes import NO_OUTPUT, Outcome, succeeded
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from executions.handlers import Handler, HandlerContext, NonRetryable, registry
from workflows.dsl import ast
from workflows.dsl.paths import render


def needs(vertex: ast.Task) -> set[str]:
    return needs_of(vertex.input)


def _call(step: StepRun) -> tuple[Handler, Any, HandlerContext]:
    vertex = cast(ast.Task, step.vertex)
    handler = registry.get(vertex.handler)
    if handler is None:
        raise NonRetryable(f"no TASK handler is registered as '{vertex.handler}' on this worker")
    if vertex.destination and step.destination is None:
        raise NonRetryable(f"no destination named '{vertex.destination}' in this workspace")
    data = render(vertex.input, step.context)
    context = HandlerContext(str(step.execution.id), vertex.id, step.attempt, step.idempotency_key)
    return handler, data, context


def run(step: StepRun) -> Outcome:
    handler, data, context = _call(step)
    output = handler(data, context)
    if inspect.isawaitable(output):  # an ``async def`` handler outside a drain's loop (tests, tools)
        output = asyncio.run(_awaited(output))
    return succeeded(NO_OUTPUT if output is None else output)


def runs_async(step: StepRun) -> bool:
    """An ``async def`` handler runs on the drain's event loop; a plain function on a thread."""
    handler = registry.get(cast(ast.Task, step.vertex).handler)
    return handler is not None and inspect.iscoroutinefunction(handler)


async def run_async(step: StepRun) -> Outcome:
    handler, data, context = _call(step)
    output = await handler(data, context)
    return succeeded(NO_OUTPUT if output is None else output)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
