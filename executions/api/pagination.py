"""Keyset pagination: a cursor is a position in a list's sort order, and the next page is
``WHERE (sort key) > cursor`` over an index, never OFFSET — page 1,000 of a 100,000-child
fan-out costs what page 1 costs.

Each list has one cursor form with a documented pattern (the schema states it). Every string
that matches it is a position, issued or not: a page after it is answered (empty past the
end); a string that does not match is a 400 on ``cursor``. Clients should still treat a
cursor as opaque and follow ``next``: the form may change with the list's sort order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from workflows.dsl.parser import VERTEX_ID

MAX_LIMIT = 1000
_INT32 = 2**31 - 1
_INT64 = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cursor:
    """One list's cursor form: ``pattern`` (whole-string) and what it stands for."""

    pattern: str
    description: str
    parse: Callable[[str], tuple[Any, ...]]
    format: Callable[[Sequence[Any]], str]

    def after(self, text: str | None) -> tuple[Any, ...] | None:
        """The position ``text`` stands for (None: the first page). ``text`` has been
        matched against ``pattern`` already (the query serializer's field)."""
        return None if text is None else self.parse(text)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _moment(micros: str) -> datetime:
    return _EPOCH + timedelta(microseconds=int(micros))


NAME = Cursor(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}",
    "A position in the list: the last name (key) of the previous page; the next page begins after it.",
    lambda text: (text,), lambda key: str(key[0]))

# Executions newest first: (created_at as microseconds since 1970 UTC, id as 32 hex digits).
EXECUTION = Cursor(
    r"[0-9]{1,16}_[0-9a-f]{32}",
    "A position in the list: `<created_at in microseconds since 1970 UTC>_<id in 32 hex digits>` of the last "
    "execution of the previous page; the next page holds older ones.",
    lambda text: (_moment(text.split("_")[0]), uuid.UUID(hex=text.split("_")[1])),
    lambda key: f"{_micros(key[0])}_{uuid.UUID(str(key[1])).hex}")

# Children in item order: (spawn vertex, item index). An index past 32 bits is past every child.
CHILD = Cursor(
    rf"(?:{VERTEX_ID.pattern})\.[0-9]{{1,10}}",
    "A position in the list: `<spawner vertex>.<item index>` of the last child of the previous page.",
    lambda text: (text.rsplit(".", 1)[0], min(int(text.rsplit(".", 1)[1]), _INT32)),
    lambda key: f"{key[0]}.{key[1]}")

INDEX = Cursor(
    r"[0-9]{1,10}",
    "A position in the list: the item index of the last item of the previous page.",
    lambda text: (min(int(text), _INT32),), lambda key: str(key[0]))

EVENT = Cursor(
    r"[0-9]{1,19}",
    "A position in the list: the id of the last event of the previous page.",
    lambda text: (min(int(text), _INT64),), lambda key: str(key[0]))


def page(request: Request, rows: list[Any], limit: int, cursor: Cursor, key: Callable[[Any], Sequence[Any]],
         render: Callable[[list[Any]], Any]) -> Response:
    """Render ``rows`` (fetched with ``limit + 1`` to learn whether more exist) as
    ``{"results": […], "next": url | null}``."""
    more = len(rows) > limit
    rows = rows[:limit]
    next_url = None
    if more and rows:
        query = request.query_params.copy()
        query["cursor"] = cursor.format(key(rows[-1]))
        next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    return Response({"results": render(rows), "next": next_url})

