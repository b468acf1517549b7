"""Waiting for the outside world (S27): callback tokens, event waits, and what completes,
extends or times out a wait. The owner of ``executions_wait`` and ``executions_externalevent``.

**Tokens.** A callback token is ``base64url(HMAC-SHA256(server secret, step:attempt:nonce))``
with a fresh ``secrets.token_urlsafe(32)`` nonce per wait: 256 bits, URL-safe, bound to its
step and attempt. Only its SHA-256 (unique) and the nonce are stored, so the database alone
does not reveal a token; the server can show it again to the workspace's operators.

**Liveness is derived, not stored.** A token is good while its step is at the token's
attempt and RUNNING (the HTTP call that handed the token out has not finished: an early
callback) or WAITING, and has no result for that attempt yet. A timeout, a cancel and a
retry therefore revoke it without writing here, and a callback after any of them is a 410.

**Completions.** A completion (a callback, an operator) locks the step first, then its wait
row (the lock order of every writer: a step before the rows that describe it), then writes
the completion with a guarded ``UPDATE … WHERE completion IS NULL`` — single use is the
database's — and moves a WAITING step to READY (``state.resume_completed_waits``). A step
still RUNNING (the HTTP vertex has not committed its wait yet) finds the completion when it
does (``completion_of``, inside its fenced transaction, which holds the step's lock): an
early callback is never lost.

**Events.** A delivery takes the event name's advisory lock exclusively (class
``EVENT_LOCK_CLASS``, per workspace and name) before anything else, inserts the event and
resumes every matching WAITING step in one statement. A step that starts waiting takes the
same lock shared before it looks back for events, so a delivery and a registration are
ordered: the later one sees the earlier one's rows. The delivery holds no row lock while it
waits for the lock, and the step locks it then takes belong to WAITING steps, whose holders
never wait for it — so the lock cannot deadlock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from executions.core import state
from executions.core.outcomes import Outcome, failed, succeeded
from workflows.errors import Conflict, Gone, NotFound

EVENT_LOCK_CLASS = 7_318_032  # pg_locks.classid of the event-name locks (other classes: kick.py, cancel.py)
SALT = "schemabridge.callback-token"


def token_for(step_id: int, attempt: int, nonce: str) -> str:
    digest = salted_hmac(SALT, f"{step_id}:{attempt}:{nonce}", algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def callback_url(token: str) -> str:
    return f"{settings.SB['PUBLIC_URL']}/api/v1/callbacks/{token}"


def _encode(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _decode(value: Any) -> Any:
    """A jsonb column read by raw SQL (Django's psycopg connection hands jsonb over as text)."""
    return json.loads(value) if isinstance(value, str) else value


def outcome_of(completion: dict[str, Any]) -> Outcome:
    """A completion (a callback's body, an operator's, an event's data) as the step's outcome:
    SUCCEEDED with its output, or a failed attempt under the step's retry policy."""
    if completion.get("status") == "SUCCEEDED":
        return succeeded(completion.get("output"))
    return failed(str(completion.get("error") or "the callback reported FAILED"))


def ended(step_state: dict[str, Any], attempt: int) -> Outcome | None:
    """The outcome of an attempt whose wait something ended (a completion, an event, the
    timeout: ``state.resume_*`` and ``state.time_out_waits`` leave it in the step's state),
    or None while the attempt has not waited yet."""
    result = step_state.get("wait")
    if not isinstance(result, dict) or result.get("attempt") != attempt:
        return None
    if "timedOut" in result:
        return failed(str(result["timedOut"]))
    return outcome_of(result["result"])


# --- registering waits -----------------------------------------------------------------------

@dataclass(frozen=True)
class WaitSpec:
    """A wait to register for a step's attempt (a WAIT vertex's outcome, an HTTP step's call)."""

    step_id: int
    attempt: int
    execution_id: Any
    workspace_id: int
    kind: str  # callback | event
    timeout: float
    heartbeat: float | None = None
    event: str = ""
    match: tuple[tuple[tuple[str, ...], Any], ...] = ()  # (path into the event data, the execution's value)
    lookback: float = 0.0


@dataclass(frozen=True)
class Registered:
    wait_id: int
    due_at: Any  # the step's due time while it waits: its deadline, or its first heartbeat's
    token: str = ""  # a callback's
    completion: dict[str, Any] | None = None  # already there: an early callback, a looked-back event


# Shared: registrations do not exclude each other, only a delivery of the same event name.
LOCK_EVENTS_SHARED = """
    SELECT pg_advisory_xact_lock_shared(%(class)s, hashtext(k)) FROM unnest(%(keys)s::text[]) AS k ORDER BY k
"""
LOCK_EVENT = "SELECT pg_advisory_xact_lock(%(class)s, hashtext(%(key)s))"

# One statement for a batch; a redelivered run of the same attempt (a worker handed it back)
# finds its row again. ``created_at`` — when the wait began, for lookback — is taken after
# the event-name locks.
_INSERT_WAITS = """
    INSERT INTO executions_wait (step_id, attempt, execution_id, workspace_id, kind, token_hash, nonce,
                                 event_name, match, match_text, timeout_seconds, heartbeat_seconds,
                                 lookback_seconds, deadline, created_at)
    SELECT w.step_id, w.attempt, w.execution_id, w.workspace_id, w.kind, w.hash, w.nonce, w.event, w.match,
           w.match_text, w.timeout, w.heartbeat, w.lookback, now() + make_interval(secs => w.timeout),
           clock_timestamp()
    FROM unnest(%(steps)s::bigint[], %(attempts)s::int[], %(executions)s::uuid[], %(workspaces)s::int[],
                %(kinds)s::varchar[], %(hashes)s::bytea[], %(nonces)s::varchar[], %(events)s::varchar[],
                %(matches)s::jsonb[], %(match_texts)s::text[], %(timeouts)s::float8[], %(heartbeats)s::float8[],
                %(lookbacks)s::float8[])
         AS w(step_id, attempt, execution_id, workspace_id, kind, hash, nonce, event, match, match_text, timeout,
              heartbeat, lookback)
    ORDER BY w.step_id
    ON CONFLICT (step_id, attempt) DO UPDATE SET attempt = EXCLUDED.attempt
    RETURNING step_id, id, nonce, completion,
              least(deadline, now() + make_interval(secs => coalesce(heartbeat_seconds, timeout_seconds)))
"""

# For new event waits: the newest retained event of their name that matches, delivered since
# the wait began less its lookback; it completes the wait at once.
_LOOK_BACK = """
    WITH found AS (
        SELECT DISTINCT ON (w.id) w.id, e.data
        FROM executions_wait w
        JOIN executions_externalevent e
          ON e.workspace_id = w.workspace_id AND e.name = w.event_name
         AND e.created_at >= w.created_at - make_interval(secs => w.lookback_seconds)
         AND e.created_at >= clock_timestamp() - make_interval(secs => %(retention)s)
        WHERE w.id = ANY(%(waits)s::bigint[]) AND w.completion IS NULL
          AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(w.match) m
                          WHERE (e.data #> ARRAY(SELECT jsonb_array_elements_text(m->'path')))
                                IS DISTINCT FROM m->'value')
        ORDER BY w.id, e.id DESC
    )
    UPDATE executions_wait w SET completion = jsonb_build_object('status', 'SUCCEEDED', 'output', found.data),
                                 completed_at = now(), completed_by = 'event (looked back)'
    FROM found WHERE w.id = found.id
    RETURNING w.step_id, w.completion
"""


def register(cursor: Any, specs: list[WaitSpec]) -> dict[int, Registered]:
    """Register waits (inside the transaction that holds their steps' leases), by step id; an
    event wait that a retained event already satisfies (``lookbackSeconds``) comes back with
    its ``completion``."""
    if not specs:
        return {}
    keys = sorted({f"{spec.workspace_id}:{spec.event}" for spec in specs if spec.kind == "event"})
    if keys:
        cursor.execute(LOCK_EVENTS_SHARED, {"class": EVENT_LOCK_CLASS, "keys": keys})
        cursor.fetchall()
    nonces = [secrets.token_urlsafe(32) if spec.kind == "callback" else "" for spec in specs]
    cursor.execute(_INSERT_WAITS, {
        "steps": [spec.step_id for spec in specs], "attempts": [spec.attempt for spec in specs],
        "executions": [spec.execution_id for spec in specs], "workspaces": [spec.workspace_id for spec in specs],
        "kinds": [spec.kind for spec in specs],
        "hashes": [token_hash(token_for(spec.step_id, spec.attempt, nonce)) if spec.kind == "callback" else None
                   for spec, nonce in zip(specs, nonces, strict=True)],
        "nonces": nonces, "events": [spec.event for spec in specs],
        "matches": [_encode([{"path": list(path), "value": value} for path, value in spec.match]) for spec in specs],
        "match_texts": [", ".join(f"{'.'.join(path) or '$'} = {_encode(value)}" for path, value in spec.match)[:1000]
                        for spec in specs],
        "timeouts": [spec.timeout for spec in specs], "heartbeats": [spec.heartbeat for spec in specs],
        "lookbacks": [spec.lookback for spec in specs]})
    attempts = {spec.step_id: spec.attempt for spec in specs}
    found = {step_id: Registered(wait_id, due_at, token_for(step_id, attempts[step_id], nonce) if nonce else "",
                                 _decode(completion))
             for step_id, wait_id, nonce, completion, due_at in cursor.fetchall()}
    events = [found[spec.step_id].wait_id for spec in specs if spec.kind == "event"
              and found[spec.step_id].completion is None]
    if events:
        cursor.execute(_LOOK_BACK, {"waits": events, "retention": float(settings.SB["EVENT_RETENTION_SECONDS"])})
        for step_id, completion in cursor.fetchall():
            before = found[step_id]
            found[step_id] = Registered(before.wait_id, before.due_at, before.token, _decode(completion))
    return found


_COMPLETION_OF = """
    SELECT completion, least(deadline, now() + make_interval(secs => coalesce(heartbeat_seconds, timeout_seconds)))
    FROM executions_wait WHERE step_id = %(step)s AND attempt = %(attempt)s
"""


def completion_of(cursor: Any, step_id: int, attempt: int) -> tuple[dict[str, Any] | None, Any]:
    """A RUNNING step's wait as it commits to waiting (its fenced transaction holds the step's
    lock, so a callback either committed before — seen here — or waits and finds it WAITING):
    (the completion already there, the due time from now)."""
    cursor.execute(_COMPLETION_OF, {"step": step_id, "attempt": attempt})
    completion, due_at = cursor.fetchone()
    return _decode(completion), due_at


# --- completing a callback ---------------------------------------------------------------------

_BY_HASH = "SELECT id, step_id, attempt FROM executions_wait WHERE token_hash = %(hash)s AND kind = 'callback'"
_BY_STEP = """
    SELECT w.id, w.step_id, w.attempt FROM executions_wait w
    JOIN executions_step s ON s.id = w.step_id AND s.attempt = w.attempt
    WHERE s.id = %(step)s AND w.kind = 'callback'
"""
# The step first (lock order), then what its wait looks like now.
_LOCK_STEP = """
    SELECT status, attempt, (state->'wait'->>'attempt')::int, state->'wait' ? 'timedOut'
    FROM executions_step WHERE id = %(step)s FOR UPDATE
"""
_WAIT_NOW = """
    SELECT completion, completion = %(completion)s::jsonb, deadline,
           least(deadline, now() + make_interval(secs => coalesce(heartbeat_seconds, timeout_seconds))),
           heartbeat_seconds
    FROM executions_wait WHERE id = %(id)s
"""
_COMPLETE = """
    UPDATE executions_wait SET completion = %(completion)s::jsonb, completed_at = now(), completed_by = %(by)s
    WHERE id = %(id)s AND completion IS NULL
    RETURNING id
"""


@dataclass(frozen=True)
class Answer:
    completion: dict[str, Any]
    changed: bool  # False: the same completion had been accepted before


@dataclass(frozen=True)
class _Held:
    wait_id: int
    step_id: int
    status: str
    completion: dict[str, Any] | None
    same: bool
    due_at: Any


def _hold(cursor: Any, found: tuple[int, int, int] | None, completion: dict[str, Any] | None) -> _Held:
    """Lock a wait's step and check that the wait is live (or completed): NotFound / Gone."""
    if found is None:
        raise NotFound("no such callback token")
    wait_id, step_id, attempt = found
    cursor.execute(_LOCK_STEP, {"step": step_id})
    step = cursor.fetchone()
    if step is None:
        raise Gone("the callback's step no longer exists (its execution was deleted by data retention)")
    status, step_attempt, result_attempt, timed_out = step
    cursor.execute(_WAIT_NOW, {"id": wait_id, "completion": _encode(completion)})
    stored, same, _, due_at, _ = cursor.fetchone()
    stored = _decode(stored)
    if stored is not None:
        return _Held(wait_id, step_id, status, stored, bool(same), due_at)
    if step_attempt != attempt:
        raise Gone(f"the step was retried: this token belonged to attempt {attempt}, the step is at attempt "
                   f"{step_attempt}")
    if status == "CANCELLED":
        raise Gone("the step was cancelled")
    if result_attempt == attempt and timed_out:
        raise Gone("the wait timed out")
    if status not in ("RUNNING", "WAITING"):
        raise Gone(f"the step is {status}: it no longer waits for this callback")
    return _Held(wait_id, step_id, status, None, False, due_at)


def complete(cursor: Any, *, token: str | None = None, step_id: int | None = None,
             completion: dict[str, Any], by: str) -> Answer:
    """Complete a callback wait, by its token or (an operator) by its step: the same
    completion again changes nothing, another one is a Conflict; a wait that is over is Gone."""
    if token is not None:
        cursor.execute(_BY_HASH, {"hash": token_hash(token)})
    else:
        cursor.execute(_BY_STEP, {"step": step_id})
    held = _hold(cursor, cursor.fetchone(), completion)
    if held.completion is not None:
        if held.same:
            return Answer(held.completion, changed=False)
        raise Conflict("this callback was already completed with a different result",
                       errors=[{"field": "status", "message": f"already {held.completion.get('status')}"}])
    cursor.execute(_COMPLETE, {"id": held.wait_id, "completion": _encode(completion), "by": by[:200]})
    if cursor.fetchone() is None:  # under the step's lock this cannot happen; the guard is the database's
        raise Conflict("this callback was completed concurrently")
    if held.status == "WAITING":
        state.resume_completed_waits(cursor, [held.wait_id], message=f"callback completed: {completion['status']}"
                                                                    f" (by {by})"[:300])
    return Answer(completion, changed=True)


_EXTEND = """
    UPDATE executions_step s SET due_at = least(w.deadline, now() + make_interval(secs => w.heartbeat_seconds))
    FROM executions_wait w
    WHERE s.id = %(step)s AND w.id = %(wait)s AND s.status = 'WAITING' AND w.heartbeat_seconds IS NOT NULL
    RETURNING s.due_at
"""


def heartbeat(cursor: Any, token: str) -> dict[str, Any]:
    """Extend a live callback wait's heartbeat deadline (never past its timeout)."""
    cursor.execute(_BY_HASH, {"hash": token_hash(token)})
    held = _hold(cursor, cursor.fetchone(), None)
    if held.completion is not None:
        raise Conflict("this callback was already completed: there is nothing left to wait for")
    cursor.execute(_EXTEND, {"step": held.step_id, "wait": held.wait_id})
    row = cursor.fetchone()
    cursor.execute(_WAIT_NOW, {"id": held.wait_id, "completion": "null"})
    _, _, deadline, due_at, heartbeat_seconds = cursor.fetchone()
    return {"timesOutAt": deadline, "heartbeatDueAt": (row[0] if row else due_at) if heartbeat_seconds else None}


# --- events ---------------------------------------------------------------------------------

_INSERT_EVENT = """
    INSERT INTO executions_externalevent (workspace_id, name, data, key, created_at)
    VALUES (%(workspace)s, %(name)s, %(data)s::jsonb, %(key)s, clock_timestamp())
    ON CONFLICT (workspace_id, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id
"""
_EVENT_BY_KEY = """
    SELECT id, delivered, name = %(name)s AND data IS NOT DISTINCT FROM %(data)s::jsonb
    FROM executions_externalevent WHERE workspace_id = %(workspace)s AND key = %(key)s
"""
_MARK_DELIVERED = """
    WITH done AS (
        UPDATE executions_wait w SET completion = jsonb_build_object('status', 'SUCCEEDED', 'output',
                                                                     %(data)s::jsonb),
                                     completed_at = now(), completed_by = %(by)s
        FROM executions_step s
        WHERE s.id = ANY(%(steps)s::bigint[]) AND w.step_id = s.id AND w.attempt = s.attempt AND w.completion IS NULL
        RETURNING w.id
    )
    UPDATE executions_externalevent SET delivered = (SELECT count(*) FROM done) WHERE id = %(event)s
"""


def post_event(cursor: Any, *, workspace_id: int, name: str, data: Any, key: str | None) -> int:
    """Record an event and resume every step of the workspace waiting for it that it
    matches; returns how many. With ``key``, a repeat is answered with the first delivery's
    count and delivers nothing (a different event under the same key is a Conflict)."""
    data_text = _encode(data)
    cursor.execute(LOCK_EVENT, {"class": EVENT_LOCK_CLASS, "key": f"{workspace_id}:{name}"})
    cursor.execute(_INSERT_EVENT, {"workspace": workspace_id, "name": name, "data": data_text, "key": key})
    row = cursor.fetchone()
    if row is None:
        cursor.execute(_EVENT_BY_KEY, {"workspace": workspace_id, "key": key, "name": name, "data": data_text})
        _, delivered, same = cursor.fetchone()
        if not same:
            raise Conflict(f"event id {key!r} was already used for a different event",
                           errors=[{"field": "id", "message": "already used for a different event"}])
        return int(delivered or 0)
    moved = state.resume_matched_waits(cursor, workspace=workspace_id, name=name, data_text=data_text)
    cursor.execute(_MARK_DELIVERED, {"data": data_text, "by": f"event {row[0]}", "event": row[0],
                                     "steps": [m["id"] for m in moved]})
    return len(moved)


# --- the sweep ---------------------------------------------------------------------------------

_PURGE_EVENTS = """
    DELETE FROM executions_externalevent WHERE id IN (
        SELECT id FROM executions_externalevent WHERE created_at < now() - make_interval(secs => %(retention)s)
        ORDER BY created_at LIMIT %(limit)s)
"""
# A wait is kept as long as its tree may be (a late callback answers 410, not 404).
_PURGE_WAITS = """
    DELETE FROM executions_wait WHERE id IN (
        SELECT id FROM executions_wait WHERE created_at < now() - make_interval(secs => %(retention)s)
        ORDER BY created_at LIMIT %(limit)s)
"""


def sweep(cursor: Any, limit: int = 1000) -> int:
    """Time out the waits past their deadline (their steps go back to READY, and their vertex
    fails the attempt), and drop events and waits past their retention; returns how many
    waits timed out."""
    timed_out = state.time_out_waits(cursor, limit)
    cursor.execute(_PURGE_EVENTS, {"retention": float(settings.SB["EVENT_RETENTION_SECONDS"]), "limit": limit})
    cursor.execute(_PURGE_WAITS, {"retention": float(settings.SB["RETENTION_SECONDS"]) + 30 * 86400,
                                  "limit": limit})
    return len(timed_out)
