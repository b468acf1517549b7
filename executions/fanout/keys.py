"""A SPAWNER's ``itemKey`` (issue 31 §4): each child's business key, its item's value at a path.

The key is read by the batch's own query (spawn.BATCH_ITEMS / BATCH_VALUES select
``jsonb_typeof(item #> path)`` and ``item #>> path`` beside the item), so a batch of children
costs no extra round trip; here each (kind, text) pair is only checked. An item whose key is
missing, null, not a scalar or longer than ``MAX_KEY`` characters is a FAILED child with the
reason, like any bad item (S17): it never runs.
"""

from __future__ import annotations

from workflows.dsl import ast
from workflows.dsl.paths import parse_path

MAX_KEY = 256  # executions_execution.item_key is varchar(256)
SCALARS = ("string", "number", "boolean")


def key_path(vertex: ast.Spawner) -> list[str] | None:
    """The itemKey as the text[] path that ``#>`` takes inside the item, or None (no itemKey)."""
    if not vertex.item_key:
        return None
    return [str(segment) for segment in parse_path(vertex.item_key).segments[1:]]


def problem(vertex: ast.Spawner, index: int, kind: str | None, text: str | None) -> str | None:
    """Why the child at ``index`` has no usable key (None: the key is fine)."""
    where = f"item key {vertex.item_key} of its item (item {index})"
    if kind is None:
        return f"{where}: nothing there"
    if kind == "null":
        return f"{where}: is null"
    if kind not in SCALARS:
        return f"{where}: is a JSON {kind}, not a string, number or boolean"
    if text is not None and len(text) > MAX_KEY:
        return f"{where}: is {len(text):,} characters long, at most {MAX_KEY}"
    return None


def split(vertex: ast.Spawner, rows: list[tuple[int, str | None, str | None]]
          ) -> tuple[dict[int, str], dict[int, str]]:
    """(index → key, index → why it has none) for a batch's ``(index, kind, text)`` rows."""
    keys: dict[int, str] = {}
    bad: dict[int, str] = {}
    if not vertex.item_key:
        return keys, bad
    for index, kind, text in rows:
        why = problem(vertex, index, kind, text)
        if why:
            bad[index] = why
        else:
            keys[index] = str(text)
    return keys, bad
