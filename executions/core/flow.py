"""Destination flow control (issue 29, S21/S22): the shared cooldown, the current limit and the
circuit breaker — the state in the destination's row, the one place that writes it, and the
pure arithmetic that decides it (docs/destinations.md, "Flow control").

A commit of HTTP results that says something about flow (a throttled or failed answer, or a
destination that is adaptive, ramping after a cooldown, or has a breaker) reads the flow
columns of its destinations (READ), lets ``advance`` — a pure function of that row and of
what the commit's calls saw — decide the new values, and turns the outcomes of the throttled
steps, and of the failed ones while the breaker is open, into waits that cost no attempt
(``judged``, ``judge``). Only where the values change does it write them, late in the commit:
it reads the row again with a lock, advances it again and writes it (``settle``), so a commit
that changes nothing (a window not yet due) locks no destination row. The claim (leases.py) reads the same columns:
it skips a destination that is cooling down or open (``CALLABLE``), takes at most its
``EFFECTIVE`` limit, and claims a half-open destination's one probe (``mark_probes``). A
commit of a destination that uses none of this (fixed mode, no breaker, only good answers)
runs none of these statements.

Every time here is the database's (``now()`` of the reading statement).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from executions.core.outcomes import Outcome, wait
from executions.platform import metrics

# --- the constants of the algorithm (docs/destinations.md) -------------------------------------

FIRST_COOLDOWN = 1.0  # seconds of a throttled answer that says nothing; doubled while they go on
WINDOW_MIN = 0.1  # seconds: the current limit changes at most once per window (max of this, the last p90)
DECREASE = 0.9  # a window with a throttled or failed call: the limit times this, rounded down
IN_USE_SHARE = 0.5  # ... grows by one when at least this share of it was in use,
LATENCY_FACTOR = 2.0  # ... and the window's p90 stayed below this times the best recent p90
BEST_DRIFT = 1.01  # the best p90 rises by 1% per window, so an old best does not hold growth back for ever
RESUME_SHARE = 0.5  # after a cooldown, calls resume at this share of the limit that was throttled
SLOW_GROWTH = 10.0  # seconds per +1 once the limit is one below the one that was throttled
CARRIED_SHARE = 1.0  # ... or rather this share of the concurrency that carried the accepted rate

# A claim's condition on a destination: not cooling down, breaker not open (the columns are
# NULL unless flow control is in use, so this costs nothing otherwise).
CALLABLE = """NOT d.paused AND (d.cooling_until IS NULL OR d.cooling_until <= now())
       AND (d.breaker_open_until IS NULL OR d.breaker_open_until <= now())"""
# The limit claims and slot take-overs keep to: the configured one, the current one (adaptive,
# or a ramp after a cooldown), one probe while the breaker is not closed. least() skips NULLs;
# all NULL: unlimited.
# An adaptive destination not yet measured starts at its floor.
# A paused destination (issue 31) reads as a limit of 0, its configured limit kept for its resume.
EFFECTIVE = ("CASE WHEN d.paused THEN 0 ELSE "
             "least(d.concurrency_limit, CASE WHEN d.concurrency_mode = 'adaptive' "
             "THEN coalesce(d.concurrency_current, d.concurrency_min) ELSE d.concurrency_current END, "
             "CASE WHEN d.breaker_state <> 'closed' THEN 1 END) END")

# Seconds from now until a call may start again (a cooldown, an open breaker), 0 when it may:
# what a drain's copy of the destination learns (calls.FOR_CALLS, leases.TAKE_OVER_SLOTS).
BLOCKED_FOR = """coalesce(greatest(0, extract(epoch FROM greatest(d.cooling_until,
                  CASE WHEN d.breaker_state = 'open' THEN d.breaker_open_until END) - now())), 0)::float8"""

# The flow columns of the destinations of a commit, in id order. The window's in-use count and
# p90 are read only when the window is due (CASE evaluates a subquery only when it is reached).
READ = """
    SELECT d.id, d.name, now() AS now, d.concurrency_mode, d.concurrency_limit, d.concurrency_min,
           d.concurrency_current, d.concurrency_changed_at, d.concurrency_reason, d.concurrency_throttled_at,
           d.cooling_until,
           d.throttle_streak, d.max_cooldown_seconds, d.max_throttled_waits, d.breaker, d.breaker_state,
           d.breaker_open_until, d.breaker_probe_step, d.breaker_failure_score, d.breaker_calls,
           d.breaker_scored_at, d.window_started_at, d.window_bad, d.window_p90_ms, d.best_p90_ms,
           w.due AS window_due,
           CASE WHEN w.due THEN (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id
                                 AND s.status = 'RUNNING' AND s.holds_slot) END AS in_use,
           CASE WHEN w.due THEN (SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY c.latency_ms)
                                 FROM executions_destinationcall c
                                 WHERE c.destination_id = d.id AND c.ok
                                   AND c.created_at >= d.window_started_at) END AS p90_ms
    FROM executions_destination d
    CROSS JOIN LATERAL (SELECT (d.concurrency_mode = 'adaptive' OR d.concurrency_current IS NOT NULL)
                               AND d.window_started_at IS NOT NULL
                               AND now() - d.window_started_at >= make_interval(
                                   secs => greatest(%(window)s, coalesce(d.window_p90_ms, 0) / 1000.0)) AS due) w
    WHERE d.id = ANY(%(ids)s)
    ORDER BY d.id
"""
# READ with the rows locked (NO KEY UPDATE, as claims lock them), to write them.
READ_LOCKED = READ + "    FOR NO KEY UPDATE OF d\n"

# When a cooldown starts: the concurrency that carried the rate the destination accepted —
# its successful calls over the last ``span`` seconds (the cooldown asked for, 1-60 s) times
# their median latency (Little's law) — from the call log's (destination, created_at) index.
CARRIED = """
    SELECT count(*)::float8 / %(span)s * percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms) / 1000.0
    FROM executions_destinationcall
    WHERE destination_id = %(id)s AND ok AND created_at > now() - make_interval(secs => %(span)s)
"""

COLUMNS = ("cooling_until", "throttle_streak", "concurrency_current", "concurrency_changed_at",
           "concurrency_reason", "concurrency_throttled_at", "window_started_at", "window_bad", "window_p90_ms",
           "best_p90_ms", "breaker_state", "breaker_open_until", "breaker_probe_step", "breaker_failure_score",
           "breaker_calls", "breaker_scored_at")

# The new flow state of one destination (the row READ locked).
WRITE = f"""
    UPDATE executions_destination SET {", ".join(f"{c} = %({c})s" for c in COLUMNS)}
    WHERE id = %(id)s
"""  # noqa: S608 - constant SQL

# A half-open destination's probe: the step a claim took into its one slot (leases.py).
MARK_PROBES = """
    UPDATE executions_destination d SET breaker_state = 'half_open', breaker_probe_step = p.step
    FROM unnest(%(ids)s::bigint[], %(steps)s::bigint[]) AS p(id, step)
    WHERE d.id = p.id AND d.breaker_state <> 'closed'
"""

# A change of mode or breaker from the API (rules.py): adaptive starts at the last current
# limit or the floor, inside [floor, ceiling]; fixed forgets it; no breaker is a closed one.
RESET = """
    UPDATE executions_destination d SET
        concurrency_current = CASE WHEN d.concurrency_mode = 'adaptive'
            THEN least(greatest(coalesce(d.concurrency_current, d.concurrency_min), d.concurrency_min),
                       coalesce(d.concurrency_limit, 2147483647))
            ELSE NULL END,
        concurrency_throttled_at = CASE WHEN d.concurrency_mode = 'adaptive' THEN d.concurrency_throttled_at END,
        concurrency_changed_at = now(),
        concurrency_reason = CASE WHEN d.concurrency_mode = 'adaptive' THEN 'set: adaptive mode' ELSE '' END,
        window_started_at = now(), window_bad = 0,
        breaker_state = CASE WHEN d.breaker IS NULL THEN 'closed' ELSE d.breaker_state END,
        breaker_open_until = CASE WHEN d.breaker IS NULL THEN NULL ELSE d.breaker_open_until END,
        breaker_probe_step = CASE WHEN d.breaker IS NULL THEN NULL ELSE d.breaker_probe_step END
    WHERE d.id = %(id)s
"""


# --- what a commit's calls saw -----------------------------------------------------------------

@dataclass
class Seen:
    """The calls of one commit to one destination. ``asked``: the longest wait a throttled
    answer asked for (None: none said); ``steps``: step id → throttling.kind of its answer."""

    calls: int = 0
    ok: int = 0
    throttled: int = 0
    failed: int = 0
    asked: float | None = None
    shown: str = ""  # the first throttled answer, for wait reasons: "429, Retry-After 10"
    steps: dict[int, str] = field(default_factory=dict)

    def add(self, step_id: int, kind: str, asked: float | None = None, shown: str = "") -> None:
        self.calls += 1
        self.steps[step_id] = kind
        if kind == "ok":
            self.ok += 1
        elif kind == "throttled":
            self.throttled += 1
            self.shown = self.shown or shown
            if asked is not None:
                self.asked = asked if self.asked is None else max(self.asked, asked)
        elif kind == "failed":
            self.failed += 1


@dataclass(frozen=True)
class Row:
    """A destination's flow columns as READ returned them."""

    id: int
    name: str
    now: datetime
    concurrency_mode: str
    concurrency_limit: int | None
    concurrency_min: int
    concurrency_current: int | None
    concurrency_changed_at: datetime | None
    concurrency_reason: str
    concurrency_throttled_at: int | None
    cooling_until: datetime | None
    throttle_streak: int
    max_cooldown_seconds: float
    max_throttled_waits: int
    breaker: dict[str, Any] | None
    breaker_state: str
    breaker_open_until: datetime | None
    breaker_probe_step: int | None
    breaker_failure_score: float
    breaker_calls: float
    breaker_scored_at: datetime | None
    window_started_at: datetime | None
    window_bad: int
    window_p90_ms: float | None
    best_p90_ms: float | None
    window_due: bool | None = False
    in_use: int | None = None
    p90_ms: float | None = None
    carried: float | None = None  # when a cooldown starts: CARRIED

    def state(self) -> dict[str, Any]:
        return {column: getattr(self, column) for column in COLUMNS}


@dataclass
class Change:
    """What ``advance`` decided: the new columns and what happened."""

    sets: dict[str, Any]
    cooldown_started: bool = False
    opened: bool = False

    def blocked_until(self, now: datetime) -> datetime | None:
        """Until when no call may start (a cooldown, an open breaker); None: calls may start."""
        times = [t for t in (self.sets["cooling_until"], self.sets["breaker_open_until"]) if t is not None and t > now]
        return max(times) if times else None


# --- the arithmetic (pure) -----------------------------------------------------------------------

def cooldown_seconds(asked: float | None, streak: int, cap: float) -> float:
    """How long a throttled answer cools the destination down: what it asked for, else
    FIRST_COOLDOWN doubled for each cooldown in a row before it; at most ``cap``."""
    if asked is None:
        asked = FIRST_COOLDOWN * 2.0 ** min(streak, 30)
    return max(0.0, min(asked, cap))


def decreased(current: int, floor: int) -> int:
    """A window with a throttled or failed call: ×DECREASE rounded down, not below the floor."""
    return max(floor, math.floor(current * DECREASE))


def grows(current: int, in_use: int, p90: float | None, best: float | None) -> bool:
    """A clean window grows the limit when enough of it was in use and latency held."""
    return p90 is not None and in_use >= current * IN_USE_SHARE and (best is None or p90 < LATENCY_FACTOR * best)


def resumed(limit: int, floor: int) -> int:
    """The limit calls resume at after a cooldown that cut ``limit``."""
    return max(floor, math.floor(limit * RESUME_SHARE))


def failure_score(score: float, n: int, failed: int, min_calls: int) -> float:
    """The breaker's failed share, weighted by recency: an exponential average over about the
    last ``min_calls`` calls (each call's weight 1/min_calls), updated by ``n`` calls of which
    ``failed`` failed, so a few failed calls open it even after a long healthy stretch."""
    if n <= 0:
        return score
    keep = (1.0 - 1.0 / max(1, min_calls)) ** n
    return score * keep + (failed / n) * (1.0 - keep)


def advance(row: Row, seen: Seen) -> Change:
    """The destination's new flow state after a commit's calls (see the module doc)."""
    sets = row.state()
    change = Change(sets)
    now = row.now
    cooling = row.cooling_until is not None and row.cooling_until > now
    if seen.throttled:
        _throttle(row, seen, change, cooling)
    elif row.throttle_streak and seen.ok and not cooling:
        sets["throttle_streak"] = 0
    if not change.cooldown_started and (row.concurrency_mode == "adaptive" or row.concurrency_current is not None):
        _window(row, seen, sets)
    if row.breaker:
        _breaker(row, seen, change)
    return change


def _throttle(row: Row, seen: Seen, change: Change, cooling: bool) -> None:
    sets, now = change.sets, row.now
    until = now + timedelta(seconds=cooldown_seconds(seen.asked, row.throttle_streak, row.max_cooldown_seconds))
    if cooling:  # already cooling down (other calls of the same burst): only a later time counts
        if row.cooling_until is not None and until > row.cooling_until:
            sets["cooling_until"] = until
        return
    change.cooldown_started = True
    sets.update(cooling_until=until, throttle_streak=row.throttle_streak + 1)
    limits = [x for x in (row.concurrency_limit, row.concurrency_current) if x is not None]
    if limits and min(limits) > 0:
        cut = min(limits)
        start, slow_from = resumed(cut, row.concurrency_min), cut
        if row.carried:  # what the destination accepted says more than the limit that was cut
            start = max(row.concurrency_min, min(cut - 1, round(row.carried * CARRIED_SHARE)))
            if row.concurrency_current is not None:  # a second cut: the estimate is worth trusting
                slow_from = start + 1
        sets.update(concurrency_current=start, concurrency_throttled_at=slow_from, concurrency_changed_at=now,
                    concurrency_reason=f"throttled at {cut}: resuming at {start} after the cooldown",
                    window_started_at=until, window_bad=0)


def _window(row: Row, seen: Seen, sets: dict[str, Any]) -> None:
    now = row.now
    bad = row.window_bad + seen.failed + seen.throttled
    current = row.concurrency_current if row.concurrency_current is not None else row.concurrency_min
    if row.window_started_at is None:
        sets.update(window_started_at=now, window_bad=bad, concurrency_current=current)
        return
    if not row.window_due:
        sets["window_bad"] = bad
        return
    p90, best = row.p90_ms, row.best_p90_ms
    ceiling = row.concurrency_limit
    new, reason = current, ""
    if bad:
        new, reason = decreased(current, row.concurrency_min), f"decreased: {bad} throttled or failed calls"
    elif grows(current, row.in_use or 0, p90, best) and (ceiling is None or current < ceiling):
        slow = row.concurrency_throttled_at is not None and current + 1 >= row.concurrency_throttled_at
        since = (now - row.concurrency_changed_at).total_seconds() if row.concurrency_changed_at else math.inf
        if not slow or since >= SLOW_GROWTH:
            new, reason = current + 1, f"increased: {row.in_use} in use, p90 {p90:.0f} ms"
    sets.update(window_started_at=now, window_bad=0)
    if p90 is not None:
        sets.update(window_p90_ms=p90, best_p90_ms=p90 if best is None else min(p90, best * BEST_DRIFT))
    if new != current:
        sets.update(concurrency_current=new, concurrency_changed_at=now, concurrency_reason=reason[:200])
    if row.concurrency_mode != "adaptive" and ceiling is not None and new >= ceiling:
        sets.update(concurrency_current=None, concurrency_throttled_at=None, concurrency_changed_at=now,
                    concurrency_reason=f"back at the limit of {ceiling}")


def _breaker(row: Row, seen: Seen, change: Change) -> None:
    sets, now, config = change.sets, row.now, row.breaker or {}
    window = float(config.get("window_seconds", 30))
    open_for = timedelta(seconds=float(config.get("open_seconds", 30)))
    if row.breaker_state != "closed":
        probe = seen.steps.get(row.breaker_probe_step) if row.breaker_probe_step is not None else None
        if probe == "ok":
            sets.update(breaker_state="closed", breaker_open_until=None, breaker_probe_step=None,
                        breaker_failure_score=0.0, breaker_calls=0.0, breaker_scored_at=now)
        elif probe is not None:  # failed (or throttled): open again
            sets.update(breaker_state="open", breaker_open_until=now + open_for, breaker_probe_step=None)
            change.opened = probe == "failed"
        return
    n = seen.ok + seen.failed
    if not n:
        return
    score, calls = row.breaker_failure_score, row.breaker_calls
    if row.breaker_scored_at is not None:
        age = (now - row.breaker_scored_at).total_seconds()
        calls *= math.exp(-age / window) if age < window * 10 else 0.0
        if age > window:
            score = 0.0
    score = failure_score(score, n, seen.failed, int(config.get("min_calls", 20)))
    calls += n
    sets.update(breaker_failure_score=score, breaker_calls=calls, breaker_scored_at=now)
    if calls >= float(config.get("min_calls", 20)) and score > float(config.get("failure_ratio", 0.5)):
        sets.update(breaker_state="open", breaker_open_until=now + open_for, breaker_probe_step=None)
        change.opened = True


# --- the verdict on each step ------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """A destination's state after a commit, as its steps' outcomes need it."""

    name: str
    max_throttled_waits: int
    cooling_until: datetime | None
    shown: str
    breaker_open_until: datetime | None  # set while the breaker is not closed


def judge(outcome: Outcome, kind: str, throttled_waits: int, verdict: Verdict) -> Outcome:
    """The outcome of a step whose call saw ``kind`` (throttling.kind): a throttled answer
    waits for the cooldown without using an attempt (up to max_throttled_waits per round),
    and so does a failed one while the breaker is open (the probe included)."""
    if kind == "throttled" and verdict.cooling_until is not None and throttled_waits < verdict.max_throttled_waits:
        until = verdict.cooling_until
        return replace(wait(reason=f"throttled by {verdict.name} until {until.isoformat(timespec='milliseconds')} "
                                   f"({verdict.shown})", due_at=until), throttled=True)
    if kind == "failed" and verdict.breaker_open_until is not None and outcome.kind == "failed":
        until = verdict.breaker_open_until
        return wait(reason=f"destination {verdict.name} is failing: circuit open until "
                           f"{until.isoformat(timespec='milliseconds')} ({outcome.error})"[:300], due_at=until)
    return outcome


# --- the statements ----------------------------------------------------------------------------

def read(cursor: Any, destination_ids: Iterable[int], *, lock: bool = False) -> list[Row]:
    cursor.execute(READ_LOCKED if lock else READ, {"ids": sorted(set(destination_ids)), "window": WINDOW_MIN})
    names = [column.name for column in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:  # Django's connection hands jsonb over as text
        if isinstance(row["breaker"], str):
            row["breaker"] = json.loads(row["breaker"])
    return [Row(**row) for row in rows]


def _advanced(cursor: Any, rows: list[Row], seen: dict[int, Seen]) -> dict[int, tuple[Row, Change]]:
    done: dict[int, tuple[Row, Change]] = {}
    for row in rows:
        calls = seen[row.id]
        if calls.throttled and not (row.cooling_until and row.cooling_until > row.now):
            span = min(60.0, max(1.0, calls.asked or 1.0))
            cursor.execute(CARRIED, {"id": row.id, "span": span})
            row = replace(row, carried=cursor.fetchone()[0])
        done[row.id] = (row, advance(row, calls))
    return done


def record(cursor: Any, seen: dict[int, Seen], in_use: dict[int, int] | None = None) -> dict[int, tuple[Row, Change]]:
    """Advance and write the flow state of the destinations in ``seen`` (rows locked, inside
    the commit's transaction); by destination id, its row as read and the change. ``in_use``:
    the slots held when the commit began (its own finished steps held theirs), for a window."""
    rows = read(cursor, seen, lock=True)
    rows = [replace(r, in_use=max(r.in_use or 0, (in_use or {}).get(r.id, 0))) if r.window_due else r for r in rows]
    done = _advanced(cursor, rows, seen)
    for row, change in done.values():
        if change.sets != row.state():
            cursor.execute(WRITE, {"id": row.id, **change.sets})
    return done


def verdict(row: Row, change: Change, seen: Seen) -> Verdict:
    sets = change.sets
    return Verdict(row.name, row.max_throttled_waits,
                   sets["cooling_until"] if sets["cooling_until"] and sets["cooling_until"] >= row.now else None,
                   seen.shown or "throttled",
                   sets["breaker_open_until"] if sets["breaker_state"] != "closed" else None)


def mark_probes(cursor: Any, probes: dict[int, int]) -> None:
    """The steps a claim took as half-open destinations' probes (destination id → step id)."""
    if probes:
        cursor.execute(MARK_PROBES, {"ids": list(probes), "steps": list(probes.values())})


def reset(cursor: Any, destination_id: int) -> None:
    """After the API changed a destination's mode or breaker (RESET)."""
    cursor.execute(RESET, {"id": destination_id})


# --- a commit's part ---------------------------------------------------------------------------

def seen_in(results: Sequence[tuple[Any, Outcome]]) -> dict[int, Seen]:
    """What the calls of a commit's results (``(StepRun, Outcome)``) saw, by destination —
    only for destinations whose flow must be recorded: a throttled or failed call, or flow
    control in use (FOR_CALLS' ``flow``). A destination-bound step without an answer that
    failed timed out."""
    seen: dict[int, Seen] = {}
    for run, outcome in results:
        destination = run.claimed.destination_id
        if destination is None or run.destination is None:
            continue
        kind, asked, shown = run.extra.get("flow") or ("failed" if outcome.kind == "failed" else "ok", None, "")
        if kind == "refused":
            continue
        if kind in ("throttled", "failed") or run.destination.get("flow") or destination in seen:
            seen.setdefault(destination, Seen()).add(run.step_id, kind, asked, shown)
    return seen


def judged(cursor: Any, results: Sequence[tuple[Any, Outcome]],
           blocked: dict[int, float] | None = None) -> tuple[list[tuple[Any, Outcome]], dict[int, tuple[Seen, int]]]:
    """A commit's results with the outcomes ``judge`` changed, decided on the destinations'
    flow state read without a lock; and what ``settle`` must write at the end of the commit —
    only the destinations whose state changes, so a commit that changes nothing locks no
    destination row (a lock a claim would skip the destination for). ``blocked`` receives, by
    destination read, the seconds until a call may start there again (0: now). Call before the
    transitions."""
    seen = seen_in(results)
    if not seen:
        return list(results), {}
    done = _advanced(cursor, read(cursor, seen), seen)
    verdicts = {d: verdict(row, change, seen[d]) for d, (row, change) in done.items()}
    _blocked(done, blocked)
    for d, calls in seen.items():
        metrics.destination_flow(d, throttled=calls.throttled, cooldowns=0)
    out = []
    for run, outcome in results:
        d = run.claimed.destination_id
        if d in verdicts and run.step_id in seen[d].steps:
            outcome = judge(outcome, seen[d].steps[run.step_id], run.claimed.throttled_waits, verdicts[d])
        out.append((run, outcome))
    return out, {d: (seen[d], row.in_use or 0) for d, (row, change) in done.items() if change.sets != row.state()}


def settle(cursor: Any, pending: dict[int, tuple[Seen, int]], blocked: dict[int, float] | None = None) -> None:
    """Write the flow state ``judged`` found changing (``record``: locked, read again), late in
    the commit so that the rows stay locked only until it ends."""
    if not pending:
        return
    seen = {d: calls for d, (calls, _) in pending.items()}
    done = record(cursor, seen, {d: in_use for d, (_, in_use) in pending.items()})
    _blocked(done, blocked)
    for d, (_, change) in done.items():
        metrics.destination_flow(d, throttled=0, cooldowns=int(change.cooldown_started))


def _blocked(done: dict[int, tuple[Row, Change]], blocked: dict[int, float] | None) -> None:
    """Seconds until a call may start at each destination read (0: now)."""
    for d, (row, change) in done.items():
        until = change.blocked_until(row.now)
        if blocked is not None:
            blocked[d] = max(blocked.get(d, 0.0), 0.0 if until is None else (until - row.now).total_seconds())
