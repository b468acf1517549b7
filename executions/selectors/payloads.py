"""Reads of stored payloads: an execution's input and output, bounded previews that never
ship a large payload whole, and the store's usage against its capacity (S7)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions import payloads as store
from executions.models import Execution


def store_usage() -> store.Pressure:
    """The payload store's live bytes (shared by every workspace), its capacity and its
    high-water mark: above the mark, fan-outs defer (S7)."""
    with connection.cursor() as cursor:
        return store.pressure(cursor)


def input_of(execution: Execution) -> Any:
    return _load(execution, store.INPUT)


def output_of(execution: Execution) -> Any:
    """The output of the vertex that finished the execution (None until it has one)."""
    if not execution.output_vertex:
        return None
    return _load(execution, execution.output_vertex)


def _load(execution: Execution, name: str) -> Any:
    with connection.cursor() as cursor:
        found = store.load(cursor, [(execution.pk, name)])
    return found.get((execution.pk, name))


# --- previews -----------------------------------------------------------------------------------

PREVIEW_BYTES = 16 * 1024  # payloads up to this size are fetched whole and shown as JSON
PREVIEW_CHARS = 3000

# A payload's size, and its data when it is at most ``limit`` bytes.
PAYLOAD_HEAD = """
    SELECT size_bytes, CASE WHEN size_bytes <= %(limit)s THEN data END
    FROM executions_payload WHERE execution_id = %(execution)s AND name = %(name)s
"""

# The shape of a large payload without shipping it: its top-level entries (a list or scalar
# payload is one entry with an empty key), each with its type, its length when it is a list,
# and the start of its first element or value.
PAYLOAD_OUTLINE = """
    SELECT e.key, jsonb_typeof(e.value),
           CASE jsonb_typeof(e.value) WHEN 'array' THEN jsonb_array_length(e.value) END,
           left(CASE jsonb_typeof(e.value) WHEN 'array' THEN (e.value -> 0)::text ELSE e.value::text END,
                %(chars)s)
    FROM executions_payload p,
         jsonb_each(CASE jsonb_typeof(p.data) WHEN 'object' THEN p.data ELSE jsonb_build_object('', p.data) END) e
    WHERE p.execution_id = %(execution)s AND p.name = %(name)s
    ORDER BY e.key LIMIT 25
"""


@dataclass(frozen=True)
class Preview:
    name: str
    size_bytes: int
    text: str
    truncated: bool  # the JSON text was cut
    outline: bool = False  # too large to show: its shape only


def preview(execution_id: Any, name: str | None) -> Preview | None:
    """A bounded preview of a stored payload: small ones as pretty JSON, large ones as an
    outline (keys, list lengths, first elements), so a 100,000-item input is never sent."""
    if not name:
        return None
    with connection.cursor() as cursor:
        cursor.execute(PAYLOAD_HEAD, {"limit": PREVIEW_BYTES, "execution": execution_id, "name": name})
        head = cursor.fetchone()
        if head is None:
            return None
        size, data = head
        if size <= PREVIEW_BYTES:
            text = json.dumps(json.loads(data) if isinstance(data, str) else data, indent=2, ensure_ascii=False)
            return Preview(name, size, text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS)
        cursor.execute(PAYLOAD_OUTLINE, {"chars": 300, "execution": execution_id, "name": name})
        return Preview(name, size, _outline(cursor.fetchall()), truncated=False, outline=True)


def _outline(entries: list[tuple[str, str, int | None, str]]) -> str:
    lines = []
    for key, kind, length, sample in entries:
        value = f"[{sample}, … {length:,} items]" if kind == "array" and length else sample
        lines.append(value if key == "" else f"{json.dumps(key)}: {value}")
    if len(entries) == 1 and entries[0][0] == "":
        return lines[0]
    return "{\n  " + ",\n  ".join(lines) + "\n}"
