"""Array parameters sent at C speed, or close to it.

The engine moves rows in sets: one statement per kind of transition takes every row's
values as parallel arrays (``unnest(%(ids)s::bigint[], …)``, state.py, records.py,
payloads.py), hundreds of elements each.

* **Server-side binding** (the default, ``SB_DB_SERVER_SIDE_BINDING``, settings.py): a list
  travels as a *binary* array (psycopg's ``ListBinaryDumper``: each element's bytes, no text
  to build in Python and none for PostgreSQL to parse; ``FlatListBinaryDumper`` packs flat
  lists of ints and of UUIDs in one pass). ``install`` registers it last, so it is what
  psycopg picks for a ``%s`` list; an empty list still goes as the text ``{}``, and a list
  of mixed types is refused as with text. In `bench destination` this, with prepared
  statements, took about a seventh off each call's CPU (docs/performance.md, "Seventh pass").
* **Client-side binding** (``SB_DB_SERVER_SIDE_BINDING=0``): each array becomes a literal in
  the statement's text, and psycopg's ``ListDumper`` builds it element by element in Python —
  a dumper call, a regular-expression search and, for text, a substitution per element; a
  fifth of a worker's interpreter time in `bench destination` ("Fifth pass").
  ``FlatListDumper`` writes flat lists of ints, UUIDs, strings and bools (None as NULL) with
  a join over ``str`` — every string quoted, its backslashes and double quotes escaped, as
  the array input syntax asks — and leaves anything else (nested lists, floats, dates,
  enums, mixed types) to psycopg's own dumper. The array's type (its oid) is chosen exactly
  as psycopg would.

Both are registered on psycopg's global adapters (``install``, from
``ExecutionsConfig.ready``), so every connection Django opens afterwards uses them.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.types.array import ListBinaryDumper, ListDumper

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


_INT_ELEMENTS = {21: ("h", 2), 23: ("i", 4), 20: ("q", 8)}  # int2, int4, int8: struct code, size
_UUID_OID = 2950
_HEAD = struct.Struct("!IIIII")  # ndims (1), hasnull, element oid, length, lower bound (1)
_LENGTH = struct.Struct("!i").pack
_LENGTH_16 = _LENGTH(16)
_NULL = _LENGTH(-1)


class FlatListBinaryDumper(ListBinaryDumper):
    """psycopg's binary list dumper, with the flat lists set-based statements send most
    written in one pass instead of a dumper call, a length and two appends per element: ints
    without NULLs (ids, counts) packed by one ``struct`` call (16 µs for 250 ids instead of
    39), UUIDs (NULLs allowed) by one join (39 µs for 250 instead of 65; strings stay with
    psycopg, whose string dumper is C and as fast). The element type is the one psycopg
    chose (``upgrade``: for ints the smallest that holds every value); the bytes are the
    ones psycopg writes (tests/integration/test_pgarrays.py); anything else — nested lists,
    other kinds, subclasses such as enums — goes to psycopg's own ``dump``."""

    def dump(self, obj: list[Any]) -> Buffer | None:
        sub = self.sub_dumper
        if not obj or sub is None:
            return super().dump(obj)
        oid = sub.oid
        if oid in _INT_ELEMENTS:
            if all(type(value) is int for value in obj):
                code, size = _INT_ELEMENTS[oid]
                values: list[int] = [size] * (2 * len(obj))  # each element: its length, then its value
                values[1::2] = obj
                return _HEAD.pack(1, 0, oid, len(obj), 1) + struct.pack("!" + ("i" + code) * len(obj), *values)
        elif oid == _UUID_OID:
            kinds = set(map(type, obj))
            if kinds == {_UUID}:
                parts: list[bytes] = [_LENGTH_16] * (2 * len(obj))  # each element: its length, then its bytes
                parts[1::2] = [value.int.to_bytes(16, "big") for value in obj]
                return _HEAD.pack(1, 0, oid, len(obj), 1) + b"".join(parts)
            if kinds == {_UUID, _NONE}:
                return _HEAD.pack(1, 1, oid, len(obj), 1) + b"".join(
                    [_NULL if value is None else _LENGTH_16 + value.int.to_bytes(16, "big") for value in obj])
        return super().dump(obj)


def install() -> None:
    """Text lists (client-side binding) by ``FlatListDumper``; binary lists, registered last,
    for the format psycopg chooses itself (``%s`` with server-side binding)."""
    psycopg.adapters.register_dumper(list, FlatListDumper)
    psycopg.adapters.register_dumper(list, FlatListBinaryDumper)
