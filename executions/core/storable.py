"""What ``jsonb`` can store, checked before anything is written: the one rule the API's body
parser, the UI's JSON fields and uploads apply.

Python's ``json`` accepts values that ``jsonb`` refuses later, deep inside a service
(``\\u0000``, lone surrogates, ``1e400`` read as infinity), and documents nested deeper than a
reader can walk. ``unstorable`` names each such value by its JSON path, so a bad document is a
4xx that points at the place, with nothing written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 100  # levels of nesting a stored document may have
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def unstorable(data: Any) -> Iterator[tuple[str, str]]:
    """``(json_path, message)`` for each value ``jsonb`` cannot hold, and for excess depth.

    A depth-first walk with one frame per open container (at most ``MAX_DEPTH``): a value's
    location is a chain of ``(parent, key)`` links, turned into a path string only when a
    problem is reported, so a body of millions of elements costs no string per element."""
    root_problem = _problem(data)
    if root_problem:
        yield "$", root_problem
        return
    frames: list[tuple[Iterator[tuple[str | int, Any]], _Location]] = []
    if isinstance(data, dict | list):
        frames.append((_members(data), None))
    while frames:
        members, location = frames[-1]
        member = next(members, None)
        if member is None:
            frames.pop()
            continue
        key, value = member
        here: _Location = (location, key)
        if isinstance(key, str) and _UNSTORABLE.search(key):
            yield _path(here), "keys cannot contain NUL characters or unpaired surrogates"
        if len(frames) > MAX_DEPTH:
            yield _path(here), f"nested more than {MAX_DEPTH} levels deep"
            continue
        problem = _problem(value)
        if problem:
            yield _path(here), problem
        elif isinstance(value, dict | list):
            frames.append((_members(value), here))


# A value's place in the document: None for the root, else (its parent's place, its key or index).
_Location = tuple[Any, str | int] | None


def _members(value: dict[str, Any] | list[Any]) -> Iterator[tuple[str | int, Any]]:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)


def _problem(value: Any) -> str | None:
    if isinstance(value, str) and _UNSTORABLE.search(value):
        return "strings cannot contain NUL characters or unpaired surrogates"
    if isinstance(value, float) and not math.isfinite(value):
        return "number out of range"
    return None


def _path(location: _Location) -> str:
    keys: list[str | int] = []
    while location is not None:
        location, key = location
        keys.append(key)
    path = "$"
    for key in reversed(keys):
        path = f"{path}[{key}]" if isinstance(key, int) else _member(path, key)
    return path


def _member(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=True)}]"
