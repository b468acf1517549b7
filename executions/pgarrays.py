"""Array parameters written as PostgreSQL array literals at C speed.

The engine moves rows in sets: one statement per kind of transition takes every row's
values as parallel arrays (``unnest(%(ids)s::bigint[], …)``, state.py, records.py,
payloads.py). Django's psycopg connections bind parameters on the client, so each array
becomes a literal, and psycopg's ``ListDumper`` builds it element by element in Python — a
dumper call, a regular-expression search and, for text, a substitution per element. In
`bench destination` that was a fifth of a worker's interpreter time (docs/performance.md,
"Fifth pass").

``FlatListDumper`` writes flat lists of ints, UUIDs, strings and bools (None as NULL) with a
join over ``str`` — every string quoted, its backslashes and double quotes escaped, as the
array input syntax asks — and leaves anything else (nested lists, floats, dates, enums,
mixed types) to psycopg's own dumper. The array's type (its oid) is chosen exactly as
before. Registered for text-format lists on psycopg's global adapters (``install``, from
``ExecutionsConfig.ready``), so every connection Django opens afterwards uses it.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.types.array import ListDumper

_UUID = uuid.UUID
_NONE = type(None)


def _quoted(value: str) -> str:
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if '"' in value:
        value = value.replace('"', '\\"')
    return f'"{value}"'


def literal(values: list[Any]) -> str | None:
    """The array literal of a flat list of ints, UUIDs, strings or bools (None: NULL), or None
    when the list holds anything else (subclasses such as enums included)."""
    kinds = {type(value) for value in values}
    nulls = _NONE in kinds
    kinds.discard(_NONE)
    if len(kinds) > 1:
        return None
    kind = kinds.pop() if kinds else _NONE
    if kind is int or kind is _UUID:
        if not nulls:
            return "{" + ",".join(map(str, values)) + "}"
        return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"
    if kind is str:
        return "{" + ",".join("NULL" if value is None else _quoted(value) for value in values) + "}"
    if kind is bool:
        return "{" + ",".join("NULL" if value is None else "t" if value else "f" for value in values) + "}"
    if kind is _NONE:
        return "{" + ",".join("NULL" for _ in values) + "}"
    return None


class FlatListDumper(ListDumper):
    """psycopg's text-format list dumper, with flat lists of the common kinds written by
    ``literal``."""

    @property
    def _encoding(self) -> str:
        """The connection's encoding, as psycopg's own string dumper chooses it (SQL_ASCII: UTF-8)."""
        encoding = self.connection.info.encoding if self.connection else "utf-8"
        return encoding if encoding != "ascii" else "utf-8"

    def dump(self, obj: list[Any]) -> Buffer | None:
        if self.delimiter == b"," and (text := literal(obj)) is not None:
            return text.encode(self._encoding)
        return super().dump(obj)


def install() -> None:
    psycopg.adapters.register_dumper(list, FlatListDumper)
