"""The API's only request parser: JSON that PostgreSQL can store, read within a size limit.

DRF's own JSON parser reads bodies without Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check,
and Python's ``json`` accepts values that ``jsonb`` refuses later, deep inside a service
(``\\u0000``, lone surrogates, ``1e400`` read as infinity) — a 500 with a half-done request.
Refusing them here, with their JSON path, keeps every bad body a 4xx.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers

from executions.api.errors import BadRequest, PayloadTooLarge
from executions.core.storable import MAX_DEPTH, unstorable

MAX_REPORTED = 20


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        raw = _read_limited(stream, (parser_context or {}).get("request"))
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        except UnicodeDecodeError as error:
            raise exceptions.ParseError(f"the body is not UTF-8: {error.reason} at byte {error.start}") from error
        except RecursionError as error:
            raise exceptions.ParseError(f"the body is nested more than {MAX_DEPTH} levels deep") from error
        except ValueError as error:
            raise exceptions.ParseError(f"malformed JSON: {error}") from error
        problems = [{"path": path, "message": message} for path, message in unstorable(data)]
        if problems:
            raise BadRequest("the body has values that cannot be stored", errors=problems[:MAX_REPORTED])
        return data


def _read_limited(stream: Any, request: Any) -> bytes:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if stream is None:
        return b""
    if limit is None:
        return stream.read()
    declared = request.META.get("CONTENT_LENGTH") if request is not None else None
    if declared and str(declared).isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit:,} bytes")
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit:,} bytes")
    return raw


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class Unread(parsers.BaseParser):
    """For streamed bodies (uploads): any media type, nothing read — the view reads the body
    itself, chunk by chunk. DRF parses a session request's body during its CSRF check; this
    keeps that from reading (or refusing) an upload before its role is checked."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        return {}
