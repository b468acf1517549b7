"""What a destination's answer says about flow control (issue 29, S21): pure functions of the
status and headers, no Django.

- **Throttled**: a ``429``, or a ``503`` with ``Retry-After``. It costs its step no attempt and
  cools the whole destination down (executions/core/flow.py).
- **Failed** (for adaptive concurrency and the breaker): any other ``5xx``, a timeout, a
  transport error.
- **How long to wait** (``asked_seconds``): ``Retry-After`` as delta-seconds or an HTTP-date
  (RFC 9110 §10.2.3); else ``RateLimit-Reset`` / ``X-RateLimit-Reset`` as delta-seconds or, when
  the number is larger than any sane delay, an epoch time. None when none of them says.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Callable

OK, THROTTLED, FAILED, REFUSED = "ok", "throttled", "failed", "refused"  # REFUSED: another 4xx
RESET_HEADERS = ("ratelimit-reset", "x-ratelimit-reset")
# A reset value above this is an epoch time, not a number of seconds (a year of seconds).
EPOCH_AFTER = 365 * 24 * 3600
FIRST_WAIT = 1.0  # seconds a drain pauses on a throttled answer that says nothing (flow.FIRST_COOLDOWN)
SENT = frozenset({"retry-after", *RESET_HEADERS})  # the headers the transport keeps for us


def kind(status: int | None, retry_after: str = "") -> str:
    """ok | throttled | failed | refused for an answer (``status`` None: no answer at all)."""
    if status is None:
        return FAILED
    if status == 429 or (status == 503 and retry_after.strip()):
        return THROTTLED
    if status >= 500:
        return FAILED
    return REFUSED if status >= 400 else OK


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _date(text: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when is not None and when.tzinfo is not None else None


def asked_seconds(header: Callable[[str], str], now: float) -> float | None:
    """Seconds the server asked to wait from epoch time ``now``, from the answer's headers
    (``header(name)`` gives a header's value, or ''); None when no header says."""
    retry_after = header("retry-after").strip()
    if retry_after:
        seconds = _number(retry_after)
        if seconds is not None:
            return seconds
        when = _date(retry_after)
        if when is not None:
            return max(0.0, when - now)
    for name in RESET_HEADERS:
        value = _number(header(name))
        if value is not None:
            return max(0.0, value - now) if value > EPOCH_AFTER else value
    return None


def shown_retry_after(header: Callable[[str], str]) -> str:
    """How the wait reason names what the server said: ``Retry-After 10`` (or the reset header)."""
    for name, shown in (("retry-after", "Retry-After"), ("ratelimit-reset", "RateLimit-Reset"),
                        ("x-ratelimit-reset", "X-RateLimit-Reset")):
        value = header(name).strip()
        if value:
            return f"{shown} {value[:40]}"
    return "no Retry-After"
