"""The API's only request parser: JSON that PostgreSQL can store, read within a size limit.

DRF's own JSON parser reads bodies without Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check,
and Python's ``json`` accepts values that ``jsonb`` refuses later, deep inside a service
(``\\u0000``, lone surrogates, ``1e400`` read as infinity) — a 500 with a half-done request.
Refusing them here, with their JSON path, keeps every bad body a 4xx.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers

from executions.api.errors import BadRequest, PayloadTooLarge

MAX_DEPTH = 100
MAX_REPORTED = 20
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


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


class Unread(parsers.BaseParser):
    """For streamed bodies (uploads): any media type, nothing read — the view reads the body
    itself, chunk by chunk. DRF parses a session request's body during its CSRF check; this
    keeps that from reading (or refusing) an upload before its role is checked."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        return {}
