"""Log lines as JSON (``LOG_FORMAT=json``), carrying the execution, step and workspace a
line is about where that is known.

The drain runs each step inside ``executions.platform.logcontext.step_context``: every line
logged while the step runs — by the engine, a vertex, a handler — carries its ids, whichever
thread logs it. Ids passed explicitly with ``extra={"execution_id": …}`` win over the context.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from executions.platform.logcontext import CONTEXT_FIELDS, current


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
