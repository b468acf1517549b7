"""The children exports' two formats, written row by row for a streaming response.

JSON Lines: one object per child, ``{"index", "id", "spawner", "status", "attempt", "error",
"output", "outputBytes"}``; ``output`` is the child's output as stored (null when it has none,
or when it is larger than the inline limit: then ``outputBytes`` still gives its size).
CSV: a header row, then the same fields as columns (``output`` as JSON text).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator

from executions.selectors.children import ExportedChild

CSV_COLUMNS = ("index", "id", "spawner", "status", "attempt", "error", "output", "output_bytes")
# A cell a spreadsheet would evaluate as a formula (OWASP "CSV injection"): error texts come
# from handlers and remote servers, so such a cell is written with a leading apostrophe.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def jsonl(rows: Iterable[ExportedChild]) -> Iterator[bytes]:
    for row in rows:
        fields = json.dumps({"index": row.index, "id": str(row.id), "spawner": row.spawner, "status": row.status,
                             "attempt": row.attempt, "error": row.error, "outputBytes": row.output_bytes},
                            ensure_ascii=False)
        # The output is spliced in as stored (JSON text from PostgreSQL), not parsed and re-encoded.
        yield f'{fields[:-1]}, "output": {row.output or "null"}}}\n'.encode()


def csv_rows(rows: Iterable[ExportedChild]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([row.index, row.id, row.spawner, row.status, row.attempt, _cell(row.error),
                         row.output or "", "" if row.output_bytes is None else row.output_bytes])
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():  # the header of an empty export
        yield buffer.getvalue().encode()


def _cell(text: str) -> str:
    return f"'{text}" if text.startswith(_FORMULA_START) else text
