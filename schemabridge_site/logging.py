"""Log lines as JSON (``LOG_FORMAT=json``), carrying the execution, step and workspace a
line is about where that is known.

The drain runs each step inside ``step_context`` (executions/worker/runners.py): every line logged
while the step runs — by the engine, a vertex, a handler — carries its ids, whichever
thread logs it, because the ids live in context variables (each step thread has its own).
Ids passed explicitly with ``extra={"execution_id": …}`` win over the context.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
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
    """The context of one step run (an ``executions.runs.StepRun``)."""
    return context(execution_id=str(run.execution.id), step=run.vertex.id, step_id=run.step_id,
                   workspace=run.execution.workspace_id)


def current() -> dict[str, Any]:
    return dict(_context.get() or {})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
    the context fields that are known, and ``exception`` (the formatted traceback) if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        known = current()
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = known.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an id may be a UUID; a line must never fail to be written.
        return json.dumps(entry, default=str, ensure_ascii=False)


def formatter_config(log_format: str) -> dict[str, Any]:
    """The ``formatters`` entry of a logging dict config for ``LOG_FORMAT``: ``json`` or
    (anything else) plain text."""
    if log_format.strip().lower() == "json":
        return {"()": f"{__name__}.JsonFormatter"}
    return {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
