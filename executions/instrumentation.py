"""Optional statement counting for benchmarks (``SB_COUNT_QUERIES_DIR``).

When the variable names a directory, every database connection of this process counts the
statements it executes and writes the running total to ``<dir>/<pid>`` about once a second,
so a benchmark can compute queries per child across worker processes it then kills.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_count = 0
_last_flush = 0.0


def _flush(directory: Path) -> None:
    global _last_flush
    _last_flush = time.monotonic()
    (directory / str(os.getpid())).write_text(str(_count))


def install(directory: str) -> None:
    from django.db.backends.signals import connection_created

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        global _count
        with _lock:
            _count += 1
            if time.monotonic() - _last_flush > 1.0:
                _flush(target)
        return execute(sql, params, many, context)

    def on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
        if count not in connection.execute_wrappers:
            connection.execute_wrappers.append(count)

    connection_created.connect(on_connect, weak=False, dispatch_uid="sb-count-queries")
