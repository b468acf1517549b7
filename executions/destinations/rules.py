"""Destinations (S11): the one home of their rules, their writes and their SQL.

- **Rules.** ``validated`` checks every destination field (name pattern, base URL, timeout,
  concurrency limit, rate, response cap, and the flow-control settings of issue 29: mode,
  floor, cooldown cap, throttled waits, breaker; the flow state is read-only) and reports
  each bad field with one message. The
  API and the UI pass what they received (JSON values; form text turned into the values it
  stands for) and show these messages unchanged, so the same bad input reads the same in both.
- **Writes.** ``create_destination`` and ``update_destination``.
- The call log and what a claimed HTTP step reads of its destination: executions/core/calls.py.
  Live counts are reads: executions/selectors/destinations.py.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now

from executions.core import calls as call_log
from executions.core import flow
from executions.destinations import credentials as credential_rules
from executions.destinations import outbound
from executions.platform import notify
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

MAX_COOLDOWN = 86_400.0
MAX_WAITS = 1_000_000
MODES = ("fixed", "adaptive")
BREAKER_DEFAULTS = {"failure_ratio": 0.5, "min_calls": 20, "window_seconds": 30.0, "open_seconds": 30.0}

REQUIRED = ("name", "base_url")
EDITABLE = ("base_url", "timeout_seconds", "concurrency_limit", "rate_per_second", "max_response_bytes",
            "credentials", "concurrency_mode", "concurrency_min", "max_cooldown_seconds", "max_throttled_waits",
            "breaker", "paused")
# The flow state the engine keeps (executions/core/flow.py): shown, never written by a client.
READ_ONLY = ("cooling_until", "concurrency_current", "breaker_state")
# A change of one of them starts the flow state afresh (flow.reset).
FLOW_SETTINGS = frozenset({"concurrency_mode", "concurrency_min", "concurrency_limit", "breaker"})
# What a call reads (executions/core/calls.py, FOR_CALLS): a change of one of them returns only
# once every call that starts after it uses the new value (calls.outlive_copies).
CALL_SETTINGS = frozenset({"base_url", "timeout_seconds", "max_response_bytes", "credentials"})

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
    "concurrency_mode": "\"fixed\" (concurrency_limit is the limit) or \"adaptive\" (the engine finds the limit "
                        "between concurrency_min and concurrency_limit, which is then required)",
    "concurrency_min": f"a whole number from 1 to {MAX_LIMIT:,}, at most concurrency_limit (default 1)",
    "max_cooldown_seconds": f"a number of seconds in (0, {MAX_COOLDOWN:g}] (default 300)",
    "max_throttled_waits": f"a whole number from 0 to {MAX_WAITS:,} (default 100)",
    "breaker": "null, or an object with failure_ratio (a number in (0, 1)), min_calls (a whole number from 1 to "
               "10,000), window_seconds and open_seconds (numbers of seconds in (0, 86,400]); "
               "omitted keys take the defaults 0.5, 20, 30, 30",
    "paused": "true or false: while true no step calling it is claimed (running calls finish); "
              "its concurrency_limit is kept",
}

# The same rules as JSON Schema (the API's schema states them). A base URL's host here is a name
# whose last label begins with a letter; an IP literal is accepted too where the outbound policy
# allows it (SB_OUTBOUND_ALLOW), which a schema cannot know.
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_HOST = r"(?:[A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*"
_PATH = r'/[!"$->@-~]*'  # printable ASCII but space, '?' and '#'
BASE_URL_PATTERN = rf"^https?://{_HOST}(?::{_PORT})?(?:{_PATH})?$"
SCHEMAS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": f"^{DESTINATION_NAME.pattern}$"},
    "base_url": {"type": "string", "maxLength": MAX_URL, "pattern": BASE_URL_PATTERN},
    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT},
    "concurrency_limit": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_LIMIT},
    "rate_per_second": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": MAX_RATE},
    "max_response_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_RESPONSE_BYTES},
    "credentials": credential_rules.SCHEMA,
    "concurrency_mode": {"type": "string", "enum": sorted(MODES)},
    "concurrency_min": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "max_cooldown_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_COOLDOWN},
    "max_throttled_waits": {"type": "integer", "minimum": 0, "maximum": MAX_WAITS},
    "breaker": {"type": ["object", "null"], "additionalProperties": False, "properties": {
        "failure_ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "min_calls": {"type": "integer", "minimum": 1, "maximum": 10_000},
        "window_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_COOLDOWN},
        "open_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_COOLDOWN}}},
    "paused": {"type": "boolean"},
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


def _mode(value: Any) -> str:
    if value not in MODES:
        raise _must("concurrency_mode")
    return str(value)


def _whole(field: str, low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if not _is_number(value) or value != int(value) or not low <= value <= high:
            raise _must(field)
        return int(value)
    return check


def _cooldown(value: Any) -> float:
    if not _is_number(value) or not 0 < value <= MAX_COOLDOWN:
        raise _must("max_cooldown_seconds")
    return float(value)


BREAKER_RULES = {"failure_ratio": "a number in (0, 1)", "min_calls": "a whole number from 1 to 10,000",
                 "window_seconds": f"a number of seconds in (0, {MAX_COOLDOWN:,.0f}]",
                 "open_seconds": f"a number of seconds in (0, {MAX_COOLDOWN:,.0f}]"}


def _breaker_key(key: str, value: Any) -> bool:
    if not _is_number(value):
        return False
    if key == "failure_ratio":
        return bool(0 < value < 1)
    if key == "min_calls":
        return value == int(value) and 1 <= value <= 10_000
    return bool(0 < value <= MAX_COOLDOWN)


def _breaker(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _must("breaker")
    unknown = sorted(set(value) - set(BREAKER_DEFAULTS))
    if unknown:
        raise Bad(f"has no key {', '.join(map(repr, unknown))}; its keys are {', '.join(BREAKER_DEFAULTS)}")
    clean = {**BREAKER_DEFAULTS, **value}
    bad = [key for key in BREAKER_DEFAULTS if not _breaker_key(key, clean[key])]
    if bad:  # each bad key with its rule, so a form can say which input is wrong
        raise Bad("; ".join(f"{key} must be {BREAKER_RULES[key]}" for key in bad))
    return {"failure_ratio": float(clean["failure_ratio"]), "min_calls": int(clean["min_calls"]),
            "window_seconds": float(clean["window_seconds"]), "open_seconds": float(clean["open_seconds"])}


def _read_only(field: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        raise Bad("is read-only: the engine keeps it")
    return check


def _consistent(mode: str, limit: int | None, floor: int) -> None:
    """Rules across fields (a PATCH is checked with the fields it leaves as they are)."""
    if mode == "adaptive" and limit is None:
        message = "adaptive mode needs concurrency_limit, its ceiling"
        raise Invalid(message, errors=[{"field": "concurrency_limit", "message": message}])
    if limit is not None and floor > limit and mode == "adaptive":
        message = f"must be at most concurrency_limit ({limit})"
        raise Invalid(f"concurrency_min: {message}", errors=[{"field": "concurrency_min", "message": message}])


def _paused(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _must("paused")
    return value


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
    "concurrency_mode": _mode, "concurrency_min": _whole("concurrency_min", 1, MAX_LIMIT),
    "max_cooldown_seconds": _cooldown, "max_throttled_waits": _whole("max_throttled_waits", 0, MAX_WAITS),
    "breaker": _breaker, "paused": _paused, **{field: _read_only(field) for field in READ_ONLY},
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
    _consistent(clean.get("concurrency_mode", "fixed"), clean.get("concurrency_limit"), clean.get("concurrency_min", 1))
    sudo.require_destination(str(clean["name"]), system_actor, "creating")
    try:
        with transaction.atomic():
            created = Destination.objects.create(workspace=workspace, **_columns(clean))
            if FLOW_SETTINGS & clean.keys():
                _reset_flow(created)
                created.refresh_from_db()
            return created
    except IntegrityError as error:
        raise Conflict(f"a destination named '{clean['name']}' already exists") from error


def update_destination(destination: Any, *, system_actor: Any = None, **fields: Any) -> Any:
    """Change a destination's editable fields. A new limit is effective at the next claim
    on every worker (slots are counted from RUNNING steps; nothing to restart). A new base
    URL, credentials, timeout or response cap reaches every call that starts after the change
    has committed and returned: while steps of the destination run, the return waits for the
    workers' copies of the old values to lapse (about a second, calls.outlive_copies). A
    reserved destination needs a verified ``system_actor`` (``sudo.require_destination``)."""
    from executions.models import Destination

    sudo.require_destination(destination.name, system_actor, "changing")
    unknown = sorted(set(fields) - set(EDITABLE) - set(READ_ONLY))
    if unknown:
        raise Invalid(f"not editable: {', '.join(unknown)}",
                      errors=[{"field": f, "message": "not editable"} for f in unknown])
    clean = validated(fields)
    if clean:
        with transaction.atomic():
            current = Destination.objects.select_for_update() \
                .only("base_url", "credentials_kind", "concurrency_mode", "concurrency_limit", "concurrency_min") \
                .get(pk=destination.pk)
            _keep_secrets_home(current, clean)
            _consistent(clean.get("concurrency_mode", current.concurrency_mode),
                        clean.get("concurrency_limit", current.concurrency_limit),
                        clean.get("concurrency_min", current.concurrency_min))
            Destination.objects.filter(pk=destination.pk).update(**_columns(clean), updated_at=Now())
            if FLOW_SETTINGS & clean.keys():
                _reset_flow(current)
            if clean.get("paused") is False:  # its due steps count as work again (issue 31): wake a drain
                with connection.cursor() as cursor:
                    notify.work_created(cursor)
            # After our UPDATE holds the row: a claim that read the old values has committed
            # its steps (they show here); a later one reads the new values.
            if CALL_SETTINGS & clean.keys() and _copies_in_use(destination.pk):
                transaction.on_commit(call_log.outlive_copies)
        destination.refresh_from_db()
    return destination


def _reset_flow(destination: Any) -> None:
    """The flow state after its settings changed (flow.reset: adaptive starts at its last
    current limit or the floor, fixed forgets it, no breaker is a closed one)."""
    with connection.cursor() as cursor:
        flow.reset(cursor, destination.pk)


def _copies_in_use(destination_id: int) -> bool:
    with connection.cursor() as cursor:
        return call_log.copies_in_use(cursor, destination_id)


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the default port spelled out: what credentials are bound to."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _keep_secrets_home(current: Any, clean: dict[str, Any]) -> None:
    """Credentials were given for an origin: a new origin (scheme, host or port) needs them
    given again in the same change, or cleared (``credentials: null``). Otherwise a PATCH of
    ``base_url`` alone would send the stored secret to a host of the caller's choosing."""
    moved = "base_url" in clean and origin(clean["base_url"]) != origin(current.base_url)
    if moved and current.credentials_kind and "credentials" not in clean:
        message = ("changing the origin (scheme, host or port) of a destination with credentials needs its "
                   "credentials in the same request, or \"credentials\": null to clear them")
        raise Invalid(message, errors=[{"field": "base_url", "message": message}])
