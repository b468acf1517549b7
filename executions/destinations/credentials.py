"""A destination's credentials (issue 15, finding 8): checked, sealed at rest, injected at
call time, and kept out of everything a viewer or a log reads.

The API and UI field is ``credentials``, one of::

    {"bearer": "<token>"}
    {"basic": {"username": "<name>", "password": "<password>"}}
    {"headers": {"X-Api-Key": "<value>", ...}}

It is stored as a Fernet token (AES-128-CBC + HMAC-SHA256) under ``SB_CREDENTIALS_KEY``
(comma-separated Fernet keys: the first seals, all open, so a key can be rotated); reads show
only ``{"set": true, "kind": "bearer"}``. Without a key, credentials cannot be stored.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.checks import Error, register

KINDS = ("bearer", "basic", "headers")
MAX_SECRET = 4096
MAX_HEADERS = 10
RULE = ('{"bearer": "<token>"}, {"basic": {"username": "…", "password": "…"}} or '
        '{"headers": {"<Header-Name>": "<value>"}} (null: none)')
# Headers the call itself sets, or that would change how the request is framed or routed.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection",
                              "idempotency-key", "accept-encoding", "te", "upgrade", "expect",
                              "proxy-authorization", "keep-alive", "trailer"})

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")  # an HTTP header name (RFC 9110 token)
_VISIBLE = re.compile(r"[!-~]+")  # printable ASCII, no spaces
_HEADER_VALUE = re.compile(r"[!-~](?:[ -~]*[!-~])?")  # printable ASCII, no edge spaces, no CR/LF
REDACTED = "[redacted]"


def _text_schema(pattern: str) -> dict[str, Any]:
    return {"type": "string", "maxLength": MAX_SECRET, "pattern": f"^{pattern}$"}


def _not_reserved() -> str:
    """A header name that is none of RESERVED_HEADERS, in any case (JSON Schema patterns have no flags)."""
    spelled = ("".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in name) for name in sorted(RESERVED_HEADERS))
    return f"^(?!(?:{'|'.join(spelled)})$){_TOKEN.pattern}$"


def _one(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {kind: value}, "required": [kind], "additionalProperties": False}


# What ``checked`` accepts, as JSON Schema (the API's schema of ``credentials``).
SCHEMA: dict[str, Any] = {"oneOf": [
    _one("bearer", _text_schema(_VISIBLE.pattern)),
    _one("basic", {"type": "object", "required": ["username", "password"], "additionalProperties": False,
                   "properties": {"username": _text_schema("(?!.*:)" + _HEADER_VALUE.pattern),
                                  "password": _text_schema(_HEADER_VALUE.pattern)}}),
    _one("headers", {"type": "object", "minProperties": 1, "maxProperties": MAX_HEADERS,
                     "propertyNames": {"pattern": _not_reserved()},
                     "additionalProperties": _text_schema(_HEADER_VALUE.pattern)}),
    {"type": "null"},
]}


class CredentialsError(ValueError):
    pass


class NoKeyError(CredentialsError):
    pass


def checked(value: Any) -> dict[str, Any] | None:
    """``value`` if it is one of the accepted shapes (None clears); raises CredentialsError."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in KINDS:
        raise CredentialsError(f"must be {RULE}")
    kind, secret = next(iter(value.items()))
    if kind == "bearer":
        _text(secret, "the bearer token", _VISIBLE)
    elif kind == "basic":
        if not isinstance(secret, dict) or set(secret) != {"username", "password"}:
            raise CredentialsError('basic must be {"username": "…", "password": "…"}')
        _text(secret["username"], "the user name", _HEADER_VALUE)
        if ":" in secret["username"]:
            raise CredentialsError("the user name must not contain ':'")
        _text(secret["password"], "the password", _HEADER_VALUE)
    else:
        if not isinstance(secret, dict) or not 1 <= len(secret) <= MAX_HEADERS:
            raise CredentialsError(f"headers must be an object of 1 to {MAX_HEADERS} header names and values")
        for name, header_value in secret.items():
            if not _TOKEN.fullmatch(name):
                raise CredentialsError(f"{name!r} is not a header name")
            if name.lower() in RESERVED_HEADERS:
                raise CredentialsError(f"the {name} header is set by the call itself")
            _text(header_value, f"the {name} value", _HEADER_VALUE)
    return {kind: secret}


def _text(value: Any, what: str, pattern: re.Pattern[str]) -> None:
    if not isinstance(value, str) or len(value) > MAX_SECRET or not pattern.fullmatch(value):
        raise CredentialsError(f"{what} must be 1-{MAX_SECRET} printable ASCII characters")


def _fernet() -> MultiFernet:
    keys = [k.strip() for k in settings.SB.get("CREDENTIALS_KEY", "").split(",") if k.strip()]
    if not keys:
        raise NoKeyError("cannot be stored: SB_CREDENTIALS_KEY is not set on this server")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as error:
        raise NoKeyError("cannot be used: SB_CREDENTIALS_KEY is not a list of Fernet keys") from error


@register()
def credentials_key_is_valid(app_configs: Any, **kwargs: Any) -> list[Error]:
    """``manage.py check`` refuses an SB_CREDENTIALS_KEY that is set but not Fernet keys."""
    if not settings.SB.get("CREDENTIALS_KEY", "").strip():
        return []
    try:
        _fernet()
    except NoKeyError as error:
        return [Error(str(error), hint="Make one with: python -c 'from cryptography.fernet import Fernet; "
                                       "print(Fernet.generate_key().decode())'", id="schemabridge.E021")]
    return []


def seal(credentials: dict[str, Any]) -> str:
    return _fernet().encrypt(json.dumps(credentials).encode()).decode()


def unseal(sealed: str) -> dict[str, Any]:
    """The credentials sealed in ``sealed``; raises CredentialsError if no key opens them."""
    try:
        return dict(json.loads(_fernet().decrypt(sealed.encode())))
    except InvalidToken as error:
        raise CredentialsError("the stored credentials cannot be opened with SB_CREDENTIALS_KEY") from error


def problem(sealed: str) -> str:
    """Why sealed credentials cannot be used now (a key was removed or changed), or ''."""
    try:
        unseal(sealed)
    except CredentialsError as error:  # NoKeyError included
        return f"{error}; set them again"
    return ""


def kind_of(credentials: dict[str, Any]) -> str:
    return next(iter(credentials))


def headers(credentials: dict[str, Any]) -> dict[str, str]:
    """The request headers that carry ``credentials``."""
    kind, secret = next(iter(credentials.items()))
    if kind == "bearer":
        return {"Authorization": f"Bearer {secret}"}
    if kind == "basic":
        pair = f"{secret['username']}:{secret['password']}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
    return dict(secret)


def secrets(credentials: dict[str, Any]) -> list[str]:
    """Every string that must not appear in an error, event or log: each secret value and
    each header value made from them (longest first, so redaction replaces whole values)."""
    kind, secret = next(iter(credentials.items()))
    values = [secret] if kind == "bearer" else [secret["password"]] if kind == "basic" else list(secret.values())
    values += [value.split(" ", 1)[-1] for value in headers(credentials).values()]
    # As a server may quote them back: JSON-escaped (also with '/' escaped) and percent-encoded.
    forms = set()
    for value in values:
        escaped = json.dumps(value)[1:-1]
        forms |= {value, escaped, escaped.replace("/", "\\/"), quote(value, safe=""), quote_plus(value, safe="")}
    return sorted({v for v in forms if v}, key=len, reverse=True)


def redact(text: str, hidden: list[str]) -> str:
    for value in hidden:
        text = text.replace(value, REDACTED)
    return text


def excerpt(read: Callable[[int], str], size: int, hidden: list[str], limit: int = 120) -> str:
    """The start of a body on one line, at most ``limit`` characters, redacted *before* it is
    cut: a secret that straddled the cut would otherwise show its first characters.
    ``read(n)`` decodes the body's first ``n`` bytes; the window grows until the redacted,
    whitespace-collapsed text is longer than ``limit`` by the longest secret (so no secret can
    start inside the excerpt and end outside the window) or holds the whole body."""
    longest = max((len(value) for value in hidden), default=0)
    window = limit * 4 + longest * 6
    while True:
        text = " ".join(redact(read(window), hidden).split())
        if len(text) >= limit + longest or window >= size:
            break
        window *= 4
    return text if len(text) <= limit else text[:limit - 1] + "…"
