"""Reads of stored payloads: an execution's input and output, bounded previews that never
ship a large payload whole, and the store's usage against its capacity (S7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from django.core.cache import cache
from django.db import connection

from executions.core import payloads as store
from executions.core import versions
from executions.models import Execution, FanOut
from workflows.dsl import ast
from workflows.errors import NotFound


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
    SELECT size_bytes, CASE WHEN size_bytes <= %(limit)s THEN data END, xmin::text || '/' || ctid::text
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
        size, data, version = head
        if size <= PREVIEW_BYTES:
            text = json.dumps(json.loads(data) if isinstance(data, str) else data, indent=2, ensure_ascii=False)
            return Preview(name, size, text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS)
        return Preview(name, size, outline(cursor, execution_id, name, version), truncated=False, outline=True)


OUTLINE_CACHE_SECONDS = 24 * 3600


def outline(cursor: Any, execution_id: Any, name: str, version: str) -> str:
    """The outline of a large payload, computed once per stored version of it.

    Computing it reads the whole value (PostgreSQL decompresses a TOASTed jsonb whole: ~120 ms
    for the 63 MB input of a 1,000,000-item fan-out, ~500 ms with the outline's walk), so it is
    cached, keyed by the payload row's version (``xmin`` and ``ctid``: every rewrite, an edited
    retry's say, makes a new row version, even inside one transaction), so it is computed once
    per stored value and a rewritten payload is outlined afresh."""
    key = f"sb:payload-outline:{execution_id}:{name}:{version}"
    text = cache.get(key)
    if text is None:
        cursor.execute(PAYLOAD_OUTLINE, {"chars": 300, "execution": execution_id, "name": name})
        text = _outline(cursor.fetchall())
        cache.set(key, text, OUTLINE_CACHE_SECONDS)
    return cast(str, text)


def _outline(entries: list[tuple[str, str, int | None, str]]) -> str:
    lines = []
    for key, kind, length, sample in entries:
        value = f"[{sample}, … {length:,} items]" if kind == "array" and length else sample
        lines.append(value if key == "" else f"{json.dumps(key)}: {value}")
    if len(entries) == 1 and entries[0][0] == "":
        return lines[0]
    return "{\n  " + ",\n  ".join(lines) + "\n}"


# --- the API: inline up to 64 KB, a preview beyond, the whole streamed ----------------------------

INLINE_BYTES = 64 * 1024
STREAM_ROWS = 2000  # elements fetched per round trip while streaming a large list


@dataclass(frozen=True)
class Inline:
    """A payload for the API's detail: its value when at most INLINE_BYTES, else a preview
    (its outline) and only its size."""

    size_bytes: int | None
    value: Any
    inlined: bool
    preview: str | None


def inline(execution_id: Any, name: str | None) -> Inline:
    if not name:
        return Inline(None, None, True, None)
    with connection.cursor() as cursor:
        cursor.execute(PAYLOAD_HEAD, {"limit": INLINE_BYTES, "execution": execution_id, "name": name})
        head = cursor.fetchone()
        if head is None:
            return Inline(None, None, True, None)
        size, data, version = head
        if size <= INLINE_BYTES:
            return Inline(size, store.decode(data), True, None)
        return Inline(size, None, False, outline(cursor, execution_id, name, version))


# The top-level entries of a payload, each as JSON text unless it is a large list (streamed
# element by element instead).
STREAM_ENTRIES = """
    SELECT jsonb_typeof(p.data), e.key,
           CASE WHEN jsonb_typeof(e.value) = 'array' AND octet_length(e.value::text) > %(chunk)s
                THEN NULL ELSE e.value::text END
    FROM executions_payload p
    LEFT JOIN LATERAL jsonb_each(CASE jsonb_typeof(p.data) WHEN 'object' THEN p.data END) e ON true
    WHERE p.execution_id = %(execution)s AND p.name = %(name)s
    ORDER BY e.key
"""
# A scalar payload, whole.
STREAM_WHOLE = "SELECT data::text FROM executions_payload WHERE execution_id = %(execution)s AND name = %(name)s"
# A list's elements in order (the payload itself, or the list under a top-level key).
STREAM_ELEMENTS = """
    SELECT e.value::text FROM executions_payload p,
         jsonb_array_elements(CASE WHEN %(key)s::text IS NULL THEN p.data ELSE p.data -> %(key)s::text END)
         WITH ORDINALITY AS e(value, ord)
    WHERE p.execution_id = %(execution)s AND p.name = %(name)s
    ORDER BY e.ord
"""


# Whether a payload is stored.
PAYLOAD_EXISTS = """
    SELECT EXISTS (SELECT 1 FROM executions_payload WHERE execution_id = %(execution)s AND name = %(name)s)
"""


def exists(execution_id: Any, name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(PAYLOAD_EXISTS, {"execution": execution_id, "name": name})
        return bool(cursor.fetchone()[0])


def stream(execution_id: Any, name: str) -> Iterator[str]:
    """A stored payload as JSON text, in pieces: a list (top-level, or a large list under a
    top-level key) goes element by element through a server-side cursor, so neither this
    process nor one message holds the whole value."""
    with connection.cursor() as cursor:
        cursor.execute(STREAM_ENTRIES, {"chunk": INLINE_BYTES, "execution": execution_id, "name": name})
        entries = cursor.fetchall()
    if not entries:
        return
    kind = entries[0][0]
    if kind == "array":
        yield from _elements(execution_id, name, None)
    elif kind == "object":
        yield "{"
        for position, (_, key, text) in enumerate(entries):
            if key is None:
                break  # an empty object
            yield ("," if position else "") + json.dumps(key, ensure_ascii=False) + ":"
            if text is None:
                yield from _elements(execution_id, name, key)
            else:
                yield text
        yield "}"
    else:
        with connection.cursor() as cursor:
            cursor.execute(STREAM_WHOLE, {"execution": execution_id, "name": name})
            yield cursor.fetchone()[0]


def _elements(execution_id: Any, name: str, key: str | None) -> Iterator[str]:
    yield "["
    first = True
    with connection.chunked_cursor() as cursor:
        cursor.execute(STREAM_ELEMENTS, {"key": key, "execution": execution_id, "name": name})
        while rows := cursor.fetchmany(STREAM_ROWS):
            piece = ",".join(row[0] for row in rows)
            yield piece if first else "," + piece
            first = False
    yield "]"


# --- a MERGE's items, in pages ----------------------------------------------------------------------

# One page of a spawner's children in item order with their outputs (null unless SUCCEEDED),
# over the unique child key (parent, spawn_vertex, item_index).
MERGE_PAGE = """
    SELECT c.item_index, c.status, p.data
    FROM executions_execution c
    LEFT JOIN executions_payload p ON p.execution_id = c.id AND p.name = c.output_vertex AND c.status = 'SUCCEEDED'
    WHERE c.parent_id = %(parent)s AND c.spawn_vertex = %(spawner)s AND c.item_index IS NOT NULL
      AND c.item_index > %(after)s
    ORDER BY c.item_index LIMIT %(limit)s
"""


@dataclass(frozen=True)
class MergeItem:
    index: int
    status: str
    output: Any


@dataclass(frozen=True)
class MergePage:
    vertex: str
    spawner: str
    total: int
    counts: dict[str, int]
    items: list[MergeItem]


def merge_page(execution: Execution, vertex: str, *, after: int, limit: int) -> MergePage:
    """Up to ``limit`` items of a MERGE's output after item index ``after``: each child's
    output in item order, read where it is stored (so a 1,000,000-child merge pages in
    O(page)). Raises NotFound when ``vertex`` is not a MERGE of the execution's workflow."""
    merge = versions.get(execution.version_id).workflow.vertices.get(vertex)
    if merge is None:
        raise NotFound(f"no vertex '{vertex}' in this execution's workflow")
    if not isinstance(merge, ast.Merge):
        raise NotFound(f"vertex '{vertex}' is not a MERGE; only a MERGE's output is read in pages")
    fan = FanOut.objects.filter(execution=execution, spawner_vertex=merge.spawner).first()
    with connection.cursor() as cursor:
        cursor.execute(MERGE_PAGE, {"parent": execution.pk, "spawner": merge.spawner, "after": after,
                                    "limit": limit})
        items = [MergeItem(index, status, store.decode(data)) for index, status, data in cursor.fetchall()]
    counts = {"SUCCEEDED": fan.succeeded, "FAILED": fan.failed, "CANCELLED": fan.cancelled} if fan else {}
    return MergePage(vertex, merge.spawner, fan.total if fan else 0, counts, items)
