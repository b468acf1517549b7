"""What a log line is about: the execution, step and workspace, where that is known.

The drain runs each step inside ``step_context``: every line logged while the step runs — by
the engine, a vertex, a handler — carries its ids, whichever thread logs it, because the ids
live in context variables (each step thread and each task on the event loop has its own). The
JSON formatter (``schemabridge_site.logging``) reads them through ``current``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The fields a line may carry about the work it concerns, in output order.
CONTEXT_FIELDS = ("execution_id", "step", "step_id", "workspace")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("sb_log_context", default=None)


@contextmanager
def context(**fields: Any) -> Iterator[None]:
    """Lines logged inside the block carry ``fields`` (merged over any outer context)."""
    token = _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def step_context(run: Any) -> Any:
    """The context of one step run (an ``executions.core.runs.StepRun``)."""
    return context(execution_id=str(run.execution.id), step=run.vertex.id, step_id=run.step_id,
                   workspace=run.execution.workspace_id)


def current() -> dict[str, Any]:
    return dict(_context.get() or {})
