"""Formatting for the operator UI: durations, sizes, counts and short ids as display text.

Templates get ready-made strings from here instead of custom template filters, so the UI
needs no template library registered in settings.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

if TYPE_CHECKING:
    from executions.fanout.recovery import Counts


def duration(seconds: float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``; an empty string for unknown."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def elapsed(started: datetime | None, finished: datetime | None) -> str:
    """Duration of a finished run, or ``running 12.3 s`` for one still going."""
    if started is None:
        return ""
    if finished is not None:
        return duration((finished - started).total_seconds())
    return f"running {duration((timezone.now() - started).total_seconds())}"


def elapsed_rounds(first: datetime | None, latest: datetime | None, finished: datetime | None,
                   attempts: int) -> str:
    """The latest attempt's duration (``elapsed``); after a retry, with the total since the
    first start: ``2.8 s (22 min 44 s in all, 2 attempts)``."""
    shown = elapsed(latest or first, finished)
    if attempts > 1 and first is not None and latest is not None and latest != first:
        total = elapsed(first, finished).removeprefix("running ")
        return f"{shown} ({total} in all, {attempts} attempts)"
    return shown


def size(n: int | None) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GB"


def count(n: int | None) -> str:
    return "" if n is None else f"{n:,}"


def percent(part: float, whole: float) -> str:
    if not whole:
        return "0%"
    value = 100.0 * part / whole
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def short_id(value: Any) -> str:
    return str(value)[:8]


def snippet(text: str | None, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ratio_percent(ratio: float) -> str:
    """0.05 → ``5%``; 0.025 → ``2.5%``."""
    return f"{ratio * 100:.4g}%"


def _children(n: int) -> str:
    return f"{n:,} child" if n == 1 else f"{n:,} children"


def rerun_summary(counts: Counts) -> str:
    """What a retry of failed children re-runs, e.g. "32 failed children and 73 children
    failFast cancelled, and spawns 200 items never started" (S28)."""
    parts = [f"{_children(counts.failed)} that failed"] if counts.failed else []
    if counts.cancelled_by_fail_fast:
        parts.append(f"{_children(counts.cancelled_by_fail_fast)} that failFast cancelled")
    text = " and ".join(parts) or "no children"
    if counts.never_started:
        started = "item" if counts.never_started == 1 else "items"
        text += f", and spawns the {counts.never_started:,} {started} never started"
    return text


def retry_confirm(counts: Counts, spawner: str) -> str:
    """The confirmation an operator answers before a retry of the failed children of ``spawner``."""
    return (f"Retry the failed children of '{spawner}'? This re-runs {rerun_summary(counts)} — each once, "
            "with the same id and key and a new attempt; children an operator cancelled stay cancelled.")


def retried(counts: Counts, spawner: str) -> str:
    """The message after a retry of the failed children of ``spawner``."""
    if not counts.retried:
        return f"No failed children of '{spawner}' to retry."
    return f"Retried {counts.retried:,} children of '{spawner}': re-runs {rerun_summary(counts)}."


def ago(moment: datetime | None, now: datetime) -> str:
    """``just now``, ``3 min ago``, ``5 h ago``, ``2 d ago`` (the absolute time goes in a title)."""
    if moment is None:
        return ""
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 45:
        return "just now"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min ago"
    hours = round(seconds / 3600)
    if hours < 48:
        return f"{hours} h ago"
    return f"{round(seconds / 86400)} d ago"
