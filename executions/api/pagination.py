"""Keyset pagination: an opaque cursor holds the sort key of the last row returned, and the
next page is ``WHERE (sort key) > cursor`` over an index, never OFFSET — page 1,000 of a
100,000-child fan-out costs what page 1 costs."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from executions.api.errors import BadRequest

MAX_LIMIT = 1000
_INT32 = 2**31 - 1
_INT64 = 2**63 - 1
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

Decoder = Callable[[Any], Any]


def encode_cursor(key: Sequence[Any]) -> str:
    text = json.dumps([str(part) if isinstance(part, datetime | uuid.UUID) else part for part in key])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(text: str | None, *decoders: Decoder) -> tuple[Any, ...] | None:
    """The sort key in ``text`` (None for the first page); raises BadRequest for anything this
    API did not hand out."""
    if text is None:
        return None
    try:
        parts = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not isinstance(parts, list) or len(parts) != len(decoders):
            raise ValueError("wrong shape")
        return tuple(decode(part) for decode, part in zip(decoders, parts, strict=True))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as error:
        raise BadRequest("this cursor was not issued by this list",
                         errors=[{"field": "cursor", "message": "use the 'next' link of the previous page"}]) from error


def text(value: Any) -> str:
    if not isinstance(value, str) or _UNSTORABLE.search(value):
        raise ValueError("not a string")
    return value


def int32(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT32 <= value <= _INT32:
        raise ValueError("not a 32-bit integer")
    return value


def int64(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT64 <= value <= _INT64:
        raise ValueError("not a 64-bit integer")
    return value


def moment(value: Any) -> datetime:
    parsed = datetime.fromisoformat(text(value))
    if parsed.tzinfo is None:
        raise ValueError("a cursor time carries its offset")
    return parsed


def uuid_(value: Any) -> uuid.UUID:
    return uuid.UUID(text(value))


def page(request: Request, rows: list[Any], limit: int, key: Callable[[Any], Sequence[Any]],
         render: Callable[[list[Any]], Any]) -> Response:
    """Render ``rows`` (fetched with ``limit + 1`` to learn whether more exist) as
    ``{"results": […], "next": url | null}``."""
    more = len(rows) > limit
    rows = rows[:limit]
    next_url = None
    if more and rows:
        query = request.query_params.copy()
        query["cursor"] = encode_cursor(key(rows[-1]))
        next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    return Response({"results": render(rows), "next": next_url})
