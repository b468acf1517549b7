"""The DSL rules of waiting for the outside world (S27): the ``WAIT`` vertex and an HTTP
vertex's ``waitForCallback``. Each problem is reported with its JSON path, like the rest of
the parser (``parser.py`` calls these)."""

from __future__ import annotations

import re
from typing import Any, Protocol

from workflows.dsl import ast
from workflows.dsl.paths import is_path_string, json_key


class _Reader(Protocol):
    """What these rules use of the parser's reader (parser._Reader)."""

    def report(self, where: str, message: str) -> None: ...

    def string(self, obj: dict[str, Any], key: str, where: str, *, pattern: re.Pattern[str] | None = None,
               required: bool = False, default: str | None = None, what: str = "a string") -> str | None: ...

    def number(self, obj: dict[str, Any], key: str, where: str, default: float | None, *,
               low: float, high: float = ..., low_open: bool = False) -> float | None: ...

    def path(self, text: str, where: str, vertex_id: str, *, allow_item: bool = False,
             allow_callback: bool = False) -> None: ...

MAX_WAIT_SECONDS = 30 * 86400  # every wait has a timeout, and none waits longer than 30 days
EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
# A path into an event's data: "$" (the whole data) or "$.a.b" (object keys only).
EVENT_PATH = re.compile(r"\$(\.[A-Za-z_][A-Za-z0-9_-]*)*")
MAX_MATCH_PAIRS = 16
WAIT_FOR = ("callback", "event")
CALLBACK_FIELDS = ("timeoutSeconds", "heartbeatSeconds")


def wait_vertex(reader: _Reader, vid: str, raw: dict[str, Any], where: str, work: dict[str, Any]) -> ast.Vertex:
    """A WAIT vertex; ``work`` holds the common fields already read (next, retry)."""
    kind = raw.get("for")
    if kind not in WAIT_FOR:
        reader.report(f"{where}.for", "must be \"callback\" or \"event\"")
        kind = "callback"
    timeout = _timeout(reader, raw, where)
    if kind == "callback":
        for key in ("event", "match", "lookbackSeconds"):
            if key in raw:
                reader.report(f"{where}.{key}", f"'{key}' belongs to a WAIT for an event, not for a callback")
        heartbeat = _heartbeat(reader, raw, where, timeout)
        return ast.Wait(id=vid, next=work["next"], retry=work["retry"], timeout_seconds=timeout,
                        for_="callback", heartbeat_seconds=heartbeat)
    if "heartbeatSeconds" in raw:
        reader.report(f"{where}.heartbeatSeconds", "'heartbeatSeconds' belongs to a WAIT for a callback")
    event = reader.string(raw, "event", where, pattern=EVENT_NAME, required=True, default="",
                          what="an event name: 1-128 letters, digits, '.', '_', ':', '/' or '-'")
    lookback = reader.number(raw, "lookbackSeconds", where, 0.0, low=0, high=MAX_WAIT_SECONDS) or 0.0
    return ast.Wait(id=vid, next=work["next"], retry=work["retry"], timeout_seconds=timeout, for_="event",
                    event=event or "", match=_match(reader, raw.get("match"), f"{where}.match", vid),
                    lookback_seconds=lookback)


def wait_for_callback(reader: _Reader, raw: Any, where: str) -> ast.CallbackWait | None:
    """An HTTP vertex's ``waitForCallback`` (None when absent)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        reader.report(where, "must be an object with timeoutSeconds and, optionally, heartbeatSeconds")
        return None
    for key in raw:
        if key not in CALLBACK_FIELDS:
            reader.report(f"{where}{json_key(str(key))}", f"unknown field '{key}' in waitForCallback")
    timeout = _timeout(reader, raw, where)
    return ast.CallbackWait(timeout, _heartbeat(reader, raw, where, timeout))


def _timeout(reader: _Reader, raw: dict[str, Any], where: str) -> float:
    if raw.get("timeoutSeconds") is None:
        reader.report(where, "'timeoutSeconds' is required: every wait has a timeout (at most 30 days)")
        return float(MAX_WAIT_SECONDS)
    return reader.number(raw, "timeoutSeconds", where, MAX_WAIT_SECONDS, low=0, high=MAX_WAIT_SECONDS,
                         low_open=True) or float(MAX_WAIT_SECONDS)


def _heartbeat(reader: _Reader, raw: dict[str, Any], where: str, timeout: float) -> float | None:
    heartbeat = reader.number(raw, "heartbeatSeconds", where, None, low=0, high=MAX_WAIT_SECONDS, low_open=True)
    if heartbeat is not None and heartbeat >= timeout:
        reader.report(f"{where}.heartbeatSeconds", "must be less than timeoutSeconds")
        return None
    return heartbeat


def _match(reader: _Reader, raw: Any, where: str, vid: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        reader.report(where, "must be an object of event-data paths to execution-context paths, "
                             "e.g. {\"$.deploymentId\": \"$.input.deploymentId\"}")
        return ()
    if len(raw) > MAX_MATCH_PAIRS:
        reader.report(where, f"at most {MAX_MATCH_PAIRS} pairs")
    pairs = []
    for key, value in raw.items():
        pwhere = f"{where}{json_key(str(key))}"
        if not EVENT_PATH.fullmatch(str(key)):
            reader.report(pwhere, f"{key!r} is not a path into the event's data such as '$.deploymentId'")
            continue
        if not is_path_string(value):
            reader.report(pwhere, "must be a path into the execution context such as '$.input.deploymentId'")
            continue
        reader.path(value, pwhere, vid)
        pairs.append((str(key), str(value)))
    return tuple(sorted(pairs))
