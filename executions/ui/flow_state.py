"""A destination's flow control (issue 29) as the Rate Limits page shows and edits it: the state
the engine keeps (mode, the limit in effect and why, the cooldown, the breaker), the form's
starting values, and which submitted settings change anything. The rules are
executions/destinations/rules.py's; nothing here decides what is valid."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from executions.destinations.rules import BREAKER_DEFAULTS
from executions.models import Destination

SETTINGS = ("concurrency_mode", "concurrency_min", "max_cooldown_seconds", "max_throttled_waits", "breaker")


def _time(value: datetime | None) -> str:
    return value.strftime("%H:%M:%S UTC") if value is not None else ""


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def now(d: Destination, live: dict[str, Any]) -> dict[str, Any]:
    """What the flow cell shows: the limit in effect (``limit_now``, live_counts), how it is
    found, the cooldown and the breaker, each in words."""
    limit = live.get("limit_now", d.concurrency_limit)
    adaptive = d.concurrency_mode == "adaptive"
    if adaptive:
        how = f"adaptive {d.concurrency_min:,}–{_limit(d.concurrency_limit)}"
    elif d.concurrency_current is not None:
        how = f"fixed, ramping up to {_limit(d.concurrency_limit)} after a cooldown"
    else:
        how = "fixed"
    if d.breaker is None:
        breaker, breaker_state = "off", "off"
    elif live.get("open_until") is not None:
        breaker, breaker_state = f"open until {_time(live['open_until'])}", "open"
    elif d.breaker_state != "closed":
        breaker, breaker_state = "half open: one probe call decides", d.breaker_state
    else:
        breaker, breaker_state = "closed", "closed"
    return {
        "mode": d.concurrency_mode, "limit": _limit(limit), "limit_value": "" if limit is None else limit,
        "how": how, "reason": d.concurrency_reason if d.concurrency_current is not None or adaptive else "",
        "changed_at": _time(d.concurrency_changed_at) if d.concurrency_reason else "",
        "cooling_until": _time(live.get("cooling_until")), "breaker": breaker, "breaker_state": breaker_state,
        "settings": f"floor {d.concurrency_min:,} · cooldown ≤ {_number(d.max_cooldown_seconds)} s · "
                    f"{d.max_throttled_waits:,} throttled waits",
        "breaker_settings": "" if d.breaker is None else
        f"{d.breaker['failure_ratio']:g} of ≥ {d.breaker['min_calls']} calls in {d.breaker['window_seconds']:g} s"
        f" → open {d.breaker['open_seconds']:g} s",
    }


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else f"{value:,}"


def initial(d: Destination) -> dict[str, Any]:
    """The flow form's inputs for the destination's settings as they are."""
    breaker = {**BREAKER_DEFAULTS, **(d.breaker or {})}
    return {
        "concurrency_mode": d.concurrency_mode, "concurrency_min": d.concurrency_min,
        "max_cooldown_seconds": _number(d.max_cooldown_seconds), "max_throttled_waits": d.max_throttled_waits,
        "breaker_on": "on" if d.breaker is not None else "",
        **{f"breaker_{key}": _number(value) for key, value in breaker.items()},
    }


def setting(d: Destination, field: str) -> Any:
    return getattr(d, field)


def _same(old: Any, new: Any) -> bool:
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers) and not isinstance(new, bool):
        return float(old) == float(new)
    if isinstance(old, dict) and isinstance(new, dict):
        filled = {**BREAKER_DEFAULTS, **new}
        return filled.keys() == old.keys() and all(_same(old[k], filled[k]) for k in old)
    return bool(old == new)


def changes(d: Destination, values: dict[str, Any]) -> dict[str, Any]:
    """The submitted settings that differ from the destination's (a bad value always differs,
    so the service refuses it); an unchanged mode, floor or breaker is not sent again, since
    sending one starts the flow state afresh."""
    return {field: value for field, value in values.items() if not _same(setting(d, field), value)}


def saved(name: str, fields: list[str]) -> str:
    if not fields:
        return f"Flow control of '{name}': nothing changed."
    return f"Flow control of '{name}' saved ({', '.join(fields)})."
