"""The DSL of waiting (issue 32): WAIT for a callback or an event and an HTTP vertex's
waitForCallback — every problem at its JSON path, defaults that hash like their explicit
values — and the callback token's form."""

from __future__ import annotations

import re
from typing import Any

import pytest

from executions.core import waits
from workflows.dsl import DslError, content_hash, parse


def doc(**wait: Any) -> dict[str, Any]:
    return {"start": "w", "vertices": {"w": {"type": "WAIT", **wait}}}


def errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(DslError) as raised:
        parse(document)
    return list(raised.value.errors)


@pytest.mark.parametrize(("wait", "where", "fragment"), [
    ({"for": "callback"}, "$.vertices.w", "'timeoutSeconds' is required"),
    ({"for": "signal", "timeoutSeconds": 5}, "$.vertices.w.for", 'must be "callback" or "event"'),
    ({"for": "callback", "timeoutSeconds": 30 * 86400 + 1}, "$.vertices.w.timeoutSeconds", "at most 2592000"),
    ({"for": "callback", "timeoutSeconds": 0}, "$.vertices.w.timeoutSeconds", "greater than 0"),
    ({"for": "callback", "timeoutSeconds": 10, "heartbeatSeconds": 10}, "$.vertices.w.heartbeatSeconds",
     "less than timeoutSeconds"),
    ({"for": "callback", "timeoutSeconds": 10, "event": "x"}, "$.vertices.w.event", "belongs to a WAIT for an event"),
    ({"for": "event", "timeoutSeconds": 10}, "$.vertices.w", "'event' is required"),
    ({"for": "event", "event": "a b", "timeoutSeconds": 10}, "$.vertices.w.event", "an event name"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "heartbeatSeconds": 1}, "$.vertices.w.heartbeatSeconds",
     "belongs to a WAIT for a callback"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "match": ["$.a"]}, "$.vertices.w.match", "must be an object"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "match": {"id": "$.input.id"}}, "$.vertices.w.match.id",
     "not a path into the event's data"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "match": {"$.id": "literal"}}, "$.vertices.w.match[\"$.id\"]",
     "a path into the execution context"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "match": {"$.id": "$.nowhere"}},
     "$.vertices.w.match[\"$.id\"]", "invalid path"),
    ({"for": "event", "event": "e", "timeoutSeconds": 10, "lookbackSeconds": -1}, "$.vertices.w.lookbackSeconds",
     "at least 0"),
    ({"for": "callback", "timeoutSeconds": 10, "unknown": 1}, "$.vertices.w.unknown", "unknown field 'unknown'"),
])
def test_a_bad_wait_is_refused_at_its_path(wait: dict[str, Any], where: str, fragment: str) -> None:
    found = errors(doc(**wait))
    assert any(path == where and fragment in message for path, message in found), found


def test_defaults_hash_like_their_explicit_values() -> None:
    assert content_hash(doc(**{"for": "callback", "timeoutSeconds": 60})) == content_hash(
        doc(**{"for": "callback", "timeoutSeconds": 60.0, "heartbeatSeconds": None, "retry": {"maxAttempts": 3}}))
    assert content_hash(doc(**{"for": "event", "event": "e", "timeoutSeconds": 60})) == content_hash(
        doc(**{"for": "event", "event": "e", "timeoutSeconds": 60, "lookbackSeconds": 0, "match": {}}))
    assert content_hash(doc(**{"for": "callback", "timeoutSeconds": 60})) != content_hash(
        doc(**{"for": "callback", "timeoutSeconds": 61}))


def http(**fields: Any) -> dict[str, Any]:
    return {"start": "h", "vertices": {"h": {"type": "HTTP", "destination": "d", **fields}}}


def test_the_way_back_is_a_path_only_with_wait_for_callback() -> None:
    parse(http(body={"u": "$.callback.url", "t": "$.callback.token"}, headers={"X-T": "$.callback.token"},
               waitForCallback={"timeoutSeconds": 60}))
    assert errors(http(body="$.callback.url"))[0][0] == "$.vertices.h.body"
    assert errors(http(body="$.callback.secret", waitForCallback={"timeoutSeconds": 60}))[0] == (
        "$.vertices.h.body", "invalid path '$.callback.secret': the way back is $.callback.url or $.callback.token")
    assert errors(http(headers={"X": "$.input.x"}, waitForCallback={"timeoutSeconds": 60}))[0][0] == \
        "$.vertices.h.headers.X"
    assert errors(http(waitForCallback={"timeoutSeconds": 60, "every": 1}))[0][0] == \
        "$.vertices.h.waitForCallback.every"
    assert errors(http(waitForCallback={}))[0] == (
        "$.vertices.h.waitForCallback", "'timeoutSeconds' is required: every wait has a timeout (at most 30 days)")
    parse(http(headers={"X": "$.input.x"}))  # without waitForCallback a header is literal text, as before


def test_an_http_vertex_without_wait_for_callback_keeps_its_canonical_form() -> None:
    assert "waitForCallback" not in parse(http()).to_dict()["vertices"]["h"]


def test_a_token_is_url_safe_bound_to_its_step_and_attempt_and_stored_as_a_hash() -> None:
    token = waits.token_for(7, 1, "nonce")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token), "256 bits, base64url without padding"
    assert token == waits.token_for(7, 1, "nonce")
    assert len({token, waits.token_for(7, 2, "nonce"), waits.token_for(8, 1, "nonce"),
                waits.token_for(7, 1, "other")}) == 4
    assert len(waits.token_hash(token)) == 32 and waits.token_hash(token) != token.encode()
