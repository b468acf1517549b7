"""How long each child works, so that a run lasts long enough for its faults to land mid-run
(a scenario's ``pace``: the seconds its fan-out should take without faults)."""

from __future__ import annotations

from django.conf import settings


def child_seconds(items: int, run_seconds: float, workers: int, *, concurrency: int | None = None) -> float:
    """Per-child work time for ``items`` children to keep ``concurrency`` handler threads
    (default: every step thread of every worker) busy for about ``run_seconds``."""
    slots = concurrency or workers * int(settings.SB["STEP_THREADS"])
    return round(min(2.0, max(0.005, run_seconds * slots / max(items, 1))), 4)
