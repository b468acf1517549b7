"""The derived figures and the targets of ``bench flow`` (issue 29 §5): pure functions of what
the fragile server and the database recorded, so they are tested without a run
(tests/unit/test_bench_flow.py)."""

from __future__ import annotations

import bisect
from typing import Any

# A call that reaches the server this long after the database was seen cooling down counts as
# started during that cooldown; one sent sooner may have been claimed just before the
# cooldown was committed (the watch polls every 0.1 s, so it sees a commit up to 0.1 s late).
GRACE_SECONDS = 0.1


def mean_after(busy_by_second: list[float], settle_seconds: float, *, backlog: tuple[list[int], int, int] | None = None
               ) -> float | None:
    """Calls in flight on average over the whole seconds from ``settle_seconds`` on, the last
    (partial) second left out; None when the run had no such second. ``backlog``, as
    ``(ok_by_second, items, capacity)``: also leave out the seconds from the first one at whose
    end fewer than ``capacity`` items were left to accept — the end of the run, where no limit
    could fill the capacity (the last few children, and those waiting for a retry's backoff)."""
    end = len(busy_by_second) - 1
    if backlog is not None:
        ok_by_second, items, capacity = backlog
        accepted = 0
        for second, ok in enumerate(ok_by_second):
            accepted += ok
            if items - accepted < capacity:
                end = min(end, second)
                break
    whole = busy_by_second[int(settle_seconds):end]
    return round(sum(whole) / len(whole), 2) if whole else None


def cooldowns(samples: list[tuple[float, float | None]], grace: float = GRACE_SECONDS) -> list[tuple[float, float]]:
    """The stretches (epoch seconds) in which the database showed the destination cooling
    down, from the watch's samples ``(database now, cooling_until)``: each sample that saw
    ``cooling_until`` ahead covers [its time + grace, cooling_until); overlapping ones merge."""
    spans = sorted((seen + grace, until) for seen, until in samples if until is not None and until > seen + grace)
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def calls_within(arrivals: list[float], spans: list[tuple[float, float]]) -> int:
    """How many of the (sorted) arrival times fall inside the spans [start, end)."""
    return sum(bisect.bisect_left(arrivals, end) - bisect.bisect_left(arrivals, start) for start, end in spans)


def by_second(samples: list[tuple[float, Any]], origin: float) -> list[Any]:
    """The last sampled value in each whole second since ``origin`` (None before the first)."""
    values: list[Any] = []
    for when, value in samples:
        second = int(when - origin)
        if second < 0:
            continue
        while len(values) <= second:
            values.append(values[-1] if values else None)
        values[second] = value
    return values


def transitions(samples: list[tuple[float, Any]], origin: float) -> list[tuple[float, Any]]:
    """``(seconds since origin, value)`` each time the sampled value changed."""
    changes: list[tuple[float, Any]] = []
    for when, value in samples:
        if not changes or changes[-1][1] != value:
            changes.append((round(when - origin, 2), value))
    return changes


def _target(value: Any, ok: bool, wanted: str) -> dict[str, Any]:
    return {"value": value, "target": wanted, "ok": bool(ok)}


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def evaluate(scenario: str, figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target of the scenario: its value, what it must be, and whether it is met.

    ``figures`` holds the run's ``items``, ``succeeded``, ``merge``, ``limit``, ``calls``,
    ``throttled``, ``max_in_flight``, ``attempts_max``, ``achieved_per_s``, and per scenario
    ``rate`` and ``calls_during_cooldown`` (None: not measurable), ``capacity`` and
    ``mean_in_flight_after_settle``, or ``calls_during_outage``, ``calls_after_outage`` and
    ``reference_calls_during_outage``."""
    items, limit = figures["items"], figures["limit"]
    succeeded = figures["succeeded"] == items and figures["merge"] == "SUCCEEDED"
    targets = {"every_child_succeeded": _target(f"{figures['succeeded']}/{items}, merge {figures['merge']}",
                                                succeeded, f"{items}/{items}, merge SUCCEEDED"),
               "max_in_flight": _target(figures["max_in_flight"], figures["max_in_flight"] <= limit,
                                        f"<= {limit} (the destination's limit)")}
    share = _share(figures["throttled"], figures["calls"])
    if scenario == "rate":
        floor = 0.85 * figures["rate"]
        targets["attempts_max"] = _target(figures["attempts_max"], figures["attempts_max"] <= 1, "<= 1")
        targets["achieved_per_s"] = _target(figures["achieved_per_s"], figures["achieved_per_s"] >= floor,
                                            f">= {floor:g} (0.85 R)")
        targets["throttled_share"] = _target(share, share <= 0.10, "<= 0.10 of calls (429)")
        if figures["calls_during_cooldown"] is not None:
            targets["calls_during_cooldown"] = _target(figures["calls_during_cooldown"],
                                                       figures["calls_during_cooldown"] == 0,
                                                       "0 (no call while the database shows a cooldown)")
    elif scenario == "capacity":
        capacity = figures["capacity"]
        mean = figures["mean_in_flight_after_settle"]
        targets["mean_in_flight_after_settle"] = _target(mean, mean is not None and 0.8 * capacity <= mean <= capacity,
                                                         f"{0.8 * capacity:g} to {capacity} (0.8 C to C)")
        targets["throttled_share"] = _target(share, share <= 0.03, "<= 0.03 of calls (503)")
    else:
        during, reference = figures["calls_during_outage"], figures["reference_calls_during_outage"]
        targets["outage_mid_run"] = _target(
            f"{during} calls during it, {figures['calls_after_outage']} after it",
            during > 0 and figures["calls_after_outage"] > 0, "calls both during the outage and after it")
        targets["calls_during_outage"] = _target(
            during, during <= 0.05 * reference, f"<= {0.05 * reference:g} (0.05 of the fixed limit's {reference})")
    return targets
