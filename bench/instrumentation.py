"""Optional statement counting and timing for benchmarks (``SB_COUNT_QUERIES_DIR``).

When the variable names a directory, every database connection of this process counts the
statements it executes and their time per statement shape, and writes the running totals
to ``<dir>/<pid>.json`` about once a second, so a benchmark can report queries per child —
and where database time goes — across worker processes that it then kills.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_totals: dict[str, list[float]] = {}
_last_flush = 0.0


def shape(sql: str) -> str:
    """A short, stable label for a statement: its first words, whitespace collapsed."""
    text = re.sub(r"\s+", " ", sql).strip()
    moved = re.search(r"UPDATE (\w+) s SET status = %\(to_status\)s", text)
    if moved:
        return f"move {moved.group(1)}"
    return text[:70]


def _flush(directory: Path) -> None:
    global _last_flush
    _last_flush = time.monotonic()
    (directory / f"{os.getpid()}.json").write_text(json.dumps(_totals))


def install(directory: str) -> None:
    from django.db.backends.signals import connection_created

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)

    def measure(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - started
            with _lock:
                entry = _totals.setdefault(shape(sql), [0, 0.0])
                entry[0] += 1
                entry[1] += elapsed
                if time.monotonic() - _last_flush > 1.0:
                    _flush(target)

    def on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
        if measure not in connection.execute_wrappers:
            connection.execute_wrappers.append(measure)

    connection_created.connect(on_connect, weak=False, dispatch_uid="sb-count-queries")


def read(directory: str) -> dict[str, list[float]]:
    """Totals per statement shape across every process that wrote to ``directory``."""
    merged: dict[str, list[float]] = {}
    for path in Path(directory).glob("*.json"):
        try:
            totals = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            continue
        for key, (count, seconds) in totals.items():
            entry = merged.setdefault(key, [0, 0.0])
            entry[0] += count
            entry[1] += seconds
    return merged
