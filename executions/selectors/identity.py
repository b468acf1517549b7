"""Reads that tell children apart for an operator (issue 33 §3): a short preview of each
child's item (where its SPAWNER has no itemKey), the failed siblings before and after a child,
and what an operator's edit of an input changed (before/after, path by path)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions.core import payloads as store
from executions.models import Execution

PREVIEW_CHARS = 60
DIFF_BYTES = 64 * 1024  # inputs larger than this are not compared
MAX_CHANGES = 100

# The start of each child's input (its item, with the default itemInput), for a page of children;
# only small inputs are turned to text.
ITEM_PREVIEWS = """
    SELECT execution_id, CASE WHEN size_bytes <= 4096 THEN left(data::text, %(chars)s + 1) END
    FROM executions_payload WHERE execution_id = ANY(%(ids)s) AND name = %(name)s
"""

# The nearest FAILED sibling before / after a child, in item order (the per-item key's index).
FAILED_AFTER = """
    SELECT id, item_index FROM executions_execution
    WHERE parent_id = %(parent)s AND spawn_vertex = %(vertex)s AND item_index > %(index)s AND status = 'FAILED'
    ORDER BY item_index LIMIT 1
"""
FAILED_BEFORE = """
    SELECT id, item_index FROM executions_execution
    WHERE parent_id = %(parent)s AND spawn_vertex = %(vertex)s AND item_index < %(index)s AND status = 'FAILED'
    ORDER BY item_index DESC LIMIT 1
"""

BOTH_INPUTS = """
    SELECT name, size_bytes, CASE WHEN size_bytes <= %(limit)s THEN data::text END FROM executions_payload
    WHERE execution_id = %(execution)s AND name = ANY(%(names)s)
"""


def item_previews(ids: list[Any]) -> dict[Any, str]:
    """Child id → the first ``PREVIEW_CHARS`` characters of its input (… when cut)."""
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(ITEM_PREVIEWS, {"ids": ids, "name": store.INPUT, "chars": PREVIEW_CHARS})
        rows = cursor.fetchall()
    return {pk: (text[:PREVIEW_CHARS] + "…" if len(text) > PREVIEW_CHARS else text)
            for pk, text in rows if text is not None}


@dataclass(frozen=True)
class Sibling:
    id: Any
    index: int


def failed_siblings(child: Execution) -> tuple[Sibling | None, Sibling | None]:
    """(the previous, the next) FAILED child of the same fan-out, in item order."""
    if child.parent_id is None or child.item_index is None:
        return None, None
    params = {"parent": child.parent_id, "vertex": child.spawn_vertex, "index": child.item_index}
    found: list[Sibling | None] = []
    with connection.cursor() as cursor:
        for sql in (FAILED_BEFORE, FAILED_AFTER):
            cursor.execute(sql, params)
            row = cursor.fetchone()
            found.append(Sibling(row[0], row[1]) if row else None)
    return found[0], found[1]


@dataclass(frozen=True)
class Change:
    path: str
    before: str  # JSON text; "" when the path did not exist
    after: str  # JSON text; "" when it was removed


@dataclass(frozen=True)
class InputDiff:
    changes: list[Change]
    truncated: bool  # more than MAX_CHANGES


def input_diff(execution_id: Any) -> InputDiff | None:
    """What the operator's last edit of the input changed, or None (never edited, or either
    side too large to compare)."""
    with connection.cursor() as cursor:
        cursor.execute(BOTH_INPUTS, {"execution": execution_id, "names": [store.INPUT, store.INPUT_BEFORE],
                                     "limit": DIFF_BYTES})
        rows = {name: text for name, _, text in cursor.fetchall()}
    before, after = rows.get(store.INPUT_BEFORE), rows.get(store.INPUT)
    if before is None or after is None:
        return None
    changes = diff(json.loads(before), json.loads(after))
    return InputDiff(changes[:MAX_CHANGES], len(changes) > MAX_CHANGES)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff(before: Any, after: Any, path: str = "$") -> list[Change]:
    """The paths where two JSON values differ (objects by key, lists by position), each with
    its value before and after; at most ``MAX_CHANGES + 1``."""
    changes: list[Change] = []
    _walk(before, after, path, changes)
    return changes


_MISSING = object()


def _walk(before: Any, after: Any, path: str, out: list[Change]) -> None:
    if len(out) > MAX_CHANGES:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in list(before) + [k for k in after if k not in before]:
            _walk(before.get(key, _MISSING), after.get(key, _MISSING), f"{path}.{key}", out)
        return
    if isinstance(before, list) and isinstance(after, list):
        for i in range(max(len(before), len(after))):
            _walk(before[i] if i < len(before) else _MISSING, after[i] if i < len(after) else _MISSING,
                  f"{path}[{i}]", out)
        return
    if before is _MISSING and after is _MISSING:
        return
    if before is not _MISSING and after is not _MISSING and type(before) is type(after) and before == after:
        return
    out.append(Change(path, "" if before is _MISSING else _text(before), "" if after is _MISSING else _text(after)))
