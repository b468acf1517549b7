"""Destinations (S11): the one home of their rules, their writes and their SQL.

- **Rules.** ``validated`` checks every destination field (name pattern, base URL, timeout,
  concurrency limit, rate, response cap) and reports each bad field with one message. The
  API and the UI pass what they received (JSON values; form text turned into the values it
  stands for) and show these messages unchanged, so the same bad input reads the same in both.
- **Writes.** ``create_destination`` and ``update_destination``.
- **Named queries.** The call log behind the Rate Limits page, and what a claimed HTTP step
  needs to know about its destination (credentials sealed: executions/credentials.py). Live
  counts are reads: executions/selectors/destinations.py.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now

from executions import credentials as credential_rules
from executions import metrics, outbound
from workflows import fields as field_rules
from workflows import sudo
from workflows.dsl.parser import DESTINATION_NAME
from workflows.errors import Conflict, Invalid
from workflows.fields import Bad

log = logging.getLogger(__name__)

# --- rules ---------------------------------------------------------------------------------

MAX_URL = 500  # the column's length
MAX_TIMEOUT = 3600.0
MAX_LIMIT = 1_000_000
MAX_RATE = 1_000_000.0
DEFAULT_MAX_RESPONSE_BYTES = outbound.DEFAULT_MAX_BYTES
MAX_RESPONSE_BYTES = 100 * 1024 * 1024

REQUIRED = ("name", "base_url")
EDITABLE = ("base_url", "timeout_seconds", "concurrency_limit", "rate_per_second", "max_response_bytes",
            "credentials")

# What each field must be, as shown to API clients and UI users (and in the API schema).
RULES = {
    "name": "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
    "base_url": f"an http(s) URL of at most {MAX_URL} characters, without user name, password, query or fragment",
    "timeout_seconds": f"a number of seconds in (0, {MAX_TIMEOUT:g}]; the whole call must finish within it",
    "concurrency_limit": f"a whole number from 0 to {MAX_LIMIT:,}, or empty for unlimited",
    "rate_per_second": f"a number of requests per second in (0, {MAX_RATE:,.0f}], or empty for no rate limit",
    "max_response_bytes": f"a whole number of bytes from 1 to {MAX_RESPONSE_BYTES:,} "
                          f"(default {DEFAULT_MAX_RESPONSE_BYTES:,})",
    "credentials": credential_rules.RULE,
}


def _must(field: str) -> Bad:
    return Bad(f"must be {RULES[field]}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not DESTINATION_NAME.fullmatch(value):
        raise _must("name")
    return value


def _base_url(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_URL or not value.isascii() or not value.isprintable() \
            or " " in value:
        raise _must("base_url")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a bad port
    except ValueError as error:
        raise _must("base_url") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _must("base_url")
    if parts.username is not None or parts.password is not None:
        raise Bad("must not contain a user name or password")
    if parts.query or value.endswith("?"):
        raise Bad("must not contain a query ('?…'); put parameters in the HTTP vertex's path")
    if parts.fragment or "#" in value:
        raise Bad("must not contain a fragment ('#…'): it would cut off every vertex's path")
    if port == 0:
        raise _must("base_url")
    refused = outbound.check_literal_host(parts.hostname)
    if refused:
        raise Bad(f"cannot be called: {refused}")
    return value


def _timeout(value: Any) -> float:
    if not _is_number(value) or not 0 < value <= MAX_TIMEOUT:
        raise _must("timeout_seconds")
    return float(value)


def _limit(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_number(value) or value != int(value) or not 0 <= value <= MAX_LIMIT:
        raise _must("concurrency_limit")
    return int(value)


def _rate(value: Any) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not 0 < value <= MAX_RATE:
        raise _must("rate_per_second")
    return float(value)


def _max_response_bytes(value: Any) -> int:
    if not _is_number(value) or value != int(value) or not 1 <= value <= MAX_RESPONSE_BYTES:
        raise _must("max_response_bytes")
    return int(value)


def _credentials(value: Any) -> dict[str, str]:
    """The model's two columns for ``value``: sealed credentials and their kind (both empty: none)."""
    try:
        clean = credential_rules.checked(value)
        if clean is None:
            return {"credentials_sealed": "", "credentials_kind": ""}
        return {"credentials_sealed": credential_rules.seal(clean), "credentials_kind": credential_rules.kind_of(clean)}
    except credential_rules.CredentialsError as error:
        raise Bad(str(error)) from error


CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _name, "base_url": _base_url, "timeout_seconds": _timeout, "concurrency_limit": _limit,
    "rate_per_second": _rate, "max_response_bytes": _max_response_bytes, "credentials": _credentials,
}


def _columns(clean: dict[str, Any]) -> dict[str, Any]:
    """Clean values as model columns (credentials become their sealed form and kind)."""
    return {**{k: v for k, v in clean.items() if k != "credentials"}, **clean.get("credentials", {})}


def validated(fields: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The clean values of ``fields`` (JSON values: a number for a number, None for empty).
    Raises Invalid naming every bad, unknown or missing field, each with one message."""
    return field_rules.validated(fields, CHECKS, required=required)


# --- writes --------------------------------------------------------------------------------

def create_destination(workspace: Any, *, system_actor: Any = None, **fields: Any) -> Any:
    """Create a destination (name and base_url required). Raises Invalid or Conflict. A
    reserved (``system.*``) name needs a verified ``system_actor`` (``sudo.require_destination``)."""
    from executions.models import Destination

    clean = validated(fields, required=REQUIRED)
    sudo.require_destination(str(clean["name"]), system_actor, "creating")
    try:
        with transaction.atomic():
            return Destination.objects.create(workspace=workspace, **_columns(clean))
    except IntegrityError as error:
        raise Conflict(f"a destination named '{clean['name']}' already exists") from error


def update_destination(destination: Any, *, system_actor: Any = None, **fields: Any) -> Any:
    """Change a destination's editable fields. A new limit is effective at the next claim
    on every worker (slots are counted from RUNNING steps; nothing to restart). A reserved
    destination needs a verified ``system_actor`` (``sudo.require_destination``)."""
    from executions.models import Destination

    sudo.require_destination(destination.name, system_actor, "changing")
    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise Invalid(f"not editable: {', '.join(unknown)}",
                      errors=[{"field": f, "message": "not editable"} for f in unknown])
    clean = validated(fields)
    if clean:
        Destination.objects.filter(pk=destination.pk).update(**_columns(clean), updated_at=Now())
        destination.refresh_from_db()
    return destination


# --- named queries -------------------------------------------------------------------------

# What an HTTP step needs of its destination, for the claimed steps' destinations.
FOR_CALLS = """
    SELECT id, name, base_url, timeout_seconds, max_response_bytes, credentials_sealed
    FROM executions_destination WHERE id = ANY(%(ids)s)
"""

# One row of the call log (the Rate Limits page's error rate and latency).
RECORD_CALL = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    VALUES (%(destination)s, %(step)s, %(status)s, %(ok)s, %(latency)s, %(error)s, now())
"""

def for_calls(cursor: Any, destination_ids: list[int]) -> dict[int, dict[str, Any]]:
    """id → {id, name, base_url, timeout_seconds, max_response_bytes, credentials_sealed} (FOR_CALLS)."""
    if not destination_ids:
        return {}
    cursor.execute(FOR_CALLS, {"ids": destination_ids})
    names = [column.name for column in cursor.description]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def record_call(destination_id: int, step_id: int, status_code: int | None, seconds: float, error: str) -> None:
    """Log one outbound call (its own short autocommit statement; never fails the step)."""
    metrics.destination_calls([(destination_id, step_id, status_code, seconds, error)])
    try:
        with connection.cursor() as cursor:
            cursor.execute(RECORD_CALL, {
                "destination": destination_id, "step": step_id, "status": status_code,
                "ok": status_code is not None and status_code < 400, "latency": seconds * 1000.0,
                "error": error[:500],
            })
    except Exception:
        log.exception("could not record a call to destination %s", destination_id)


RECORD_CALLS = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    SELECT c.destination, c.step, c.status, c.status IS NOT NULL AND c.status < 400, c.latency, c.error, now()
    FROM unnest(%(destination)s::bigint[], %(step)s::bigint[], %(status)s::int[], %(latency)s::float8[],
                %(error)s::text[]) AS c(destination, step, status, latency, error)
"""


def record_calls(rows: list[tuple[int, int, int | None, float, str]], *, cursor: Any = None) -> None:
    """Log many outbound calls ``(destination_id, step_id, status_code, seconds, error)`` in one
    statement (the drain, for calls made on its event loop).

    Given ``cursor``, the rows go into the caller's transaction (the drain's commit of those
    calls' results) and an error is the caller's; without one, they are written on their own
    and an error is logged, never raised: the log never fails a step."""
    if not rows:
        return
    params: dict[str, Any] = {
        "destination": [row[0] for row in rows], "step": [row[1] for row in rows],
        "status": [row[2] for row in rows], "latency": [row[3] * 1000.0 for row in rows],
        # PostgreSQL's text cannot hold NUL; a server's answer may.
        "error": [row[4][:500].replace("\x00", "\ufffd") for row in rows],
    }
    if cursor is not None:
        cursor.execute(RECORD_CALLS, params)
        metrics.destination_calls(rows)
        return
    try:
        with connection.cursor() as own:
            own.execute(RECORD_CALLS, params)
        metrics.destination_calls(rows)
    except Exception:
        log.exception("could not record %s outbound calls", len(rows))


# Old call-log rows of one destination, oldest first, read through call_destination_recent.
DELETE_OLD_CALLS = """
    DELETE FROM executions_destinationcall WHERE id IN (
        SELECT id FROM executions_destinationcall
        WHERE destination_id = %(destination)s AND created_at < now() - make_interval(secs => %(age)s)
        ORDER BY created_at
        LIMIT %(limit)s)
"""


def purge_calls(cursor: Any, destination_id: int, *, age_seconds: float, limit: int) -> int:
    """Delete up to ``limit`` call-log rows of a destination older than ``age_seconds`` (the
    Rate Limits page reads the last five minutes; the log is kept for
    ``SB_CALL_LOG_RETENTION_SECONDS`` for inspection, then goes with the retention pass)."""
    cursor.execute(DELETE_OLD_CALLS, {"destination": destination_id, "age": age_seconds, "limit": limit})
    return int(cursor.rowcount)

