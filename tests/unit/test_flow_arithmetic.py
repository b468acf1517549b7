"""The pure arithmetic of destination flow control (executions/core/flow.py, issue 29): the
cooldown, the current limit (AIMD) and the circuit breaker, as functions of a destination's
row and of what one commit's calls saw. No database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from executions.core import flow
from executions.core.outcomes import failed

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
BREAKER = {"failure_ratio": 0.5, "min_calls": 20, "window_seconds": 30.0, "open_seconds": 30.0}


def row(**given) -> flow.Row:
    base = flow.Row(
        id=1, name="api", now=NOW, concurrency_mode="fixed", concurrency_limit=64, concurrency_min=1,
        concurrency_current=None, concurrency_changed_at=None, concurrency_reason="", concurrency_throttled_at=None,
        cooling_until=None, throttle_streak=0, max_cooldown_seconds=300.0, max_throttled_waits=100, breaker=None,
        breaker_state="closed", breaker_open_until=None, breaker_probe_step=None, breaker_failure_score=0.0,
        breaker_calls=0.0, breaker_scored_at=None, window_started_at=None, window_bad=0, window_p90_ms=None,
        best_p90_ms=None)
    return replace(base, **given)


def seen(*kinds: str, asked: float | None = None, shown: str = "429, Retry-After 10") -> flow.Seen:
    calls = flow.Seen()
    for step, kind in enumerate(kinds, start=100):
        calls.add(step, kind, asked if kind == "throttled" else None, shown if kind == "throttled" else "")
    return calls


def test_a_cooldown_is_what_was_asked_else_one_second_doubling_up_to_the_cap():
    assert flow.cooldown_seconds(10.0, 0, 300.0) == 10.0
    assert flow.cooldown_seconds(1000.0, 0, 300.0) == 300.0
    assert [flow.cooldown_seconds(None, streak, 300.0) for streak in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert flow.cooldown_seconds(None, 20, 300.0) == 300.0


def test_the_limit_decreases_by_a_tenth_rounded_down_never_below_the_floor():
    assert flow.decreased(100, 1) == 90
    assert flow.decreased(9, 1) == 8
    assert flow.decreased(1, 1) == 1
    assert flow.decreased(10, 9) == 9


def test_the_limit_grows_only_when_half_of_it_was_in_use_and_latency_held():
    assert flow.grows(10, in_use=5, p90=50.0, best=40.0)
    assert not flow.grows(10, in_use=4, p90=50.0, best=40.0), "less than half in use"
    assert not flow.grows(10, in_use=10, p90=80.0, best=40.0), "p90 at twice the best"
    assert not flow.grows(10, in_use=10, p90=None, best=40.0), "no successful call to measure"
    assert flow.grows(10, in_use=10, p90=50.0, best=None)


def test_a_throttled_answer_starts_a_cooldown_and_calls_resume_at_half_the_limit():
    change = flow.advance(row(), seen("ok", "throttled", asked=10.0))
    assert change.cooldown_started
    assert change.sets["cooling_until"] == NOW + timedelta(seconds=10)
    assert change.sets["concurrency_current"] == 32 and change.sets["concurrency_throttled_at"] == 64
    assert change.sets["throttle_streak"] == 1
    assert change.blocked_until(NOW) == NOW + timedelta(seconds=10)


def test_throttled_answers_during_a_cooldown_only_extend_it():
    cooling = row(cooling_until=NOW + timedelta(seconds=5), concurrency_current=32, concurrency_throttled_at=64,
                  throttle_streak=1, window_started_at=NOW + timedelta(seconds=5))
    change = flow.advance(cooling, seen("throttled", "throttled", asked=8.0))
    assert not change.cooldown_started
    assert change.sets["cooling_until"] == NOW + timedelta(seconds=8)
    assert change.sets["concurrency_current"] == 32, "halved once per cooldown, not per answer"
    assert flow.advance(cooling, seen("throttled", asked=2.0)).sets["cooling_until"] == NOW + timedelta(seconds=5)


def test_a_throttled_answer_without_a_header_doubles_while_they_continue():
    after_two = row(throttle_streak=2, cooling_until=NOW - timedelta(seconds=1))
    assert flow.advance(after_two, seen("throttled")).sets["cooling_until"] == NOW + timedelta(seconds=4)
    assert flow.advance(after_two, seen("ok")).sets["throttle_streak"] == 0, "a good answer ends the streak"


def adaptive(**given) -> flow.Row:
    return row(**{"concurrency_mode": "adaptive", "concurrency_limit": 256, "concurrency_current": 10,
                  "concurrency_changed_at": NOW - timedelta(seconds=1), "window_started_at": NOW - timedelta(seconds=1),
                  "best_p90_ms": 50.0, **given})


def test_a_window_with_a_failure_multiplies_the_limit_by_point_nine():
    change = flow.advance(adaptive(window_due=True, in_use=10, p90_ms=55.0), seen("ok", "failed"))
    assert change.sets["concurrency_current"] == 9
    assert change.sets["concurrency_reason"].startswith("decreased")
    assert change.sets["window_bad"] == 0 and change.sets["window_started_at"] == NOW


def test_a_clean_busy_window_adds_one_and_a_window_not_due_changes_nothing():
    grown = flow.advance(adaptive(window_due=True, in_use=8, p90_ms=55.0), seen("ok", "ok"))
    assert grown.sets["concurrency_current"] == 11
    assert grown.sets["best_p90_ms"] == 50.0 * flow.BEST_DRIFT
    idle = flow.advance(adaptive(window_due=True, in_use=2, p90_ms=55.0), seen("ok"))
    assert idle.sets["concurrency_current"] == 10, "too little in use to know more would help"
    early = flow.advance(adaptive(window_due=False), seen("failed"))
    assert early.sets["concurrency_current"] == 10 and early.sets["window_bad"] == 1, "one change per window"
    ceiling = flow.advance(adaptive(window_due=True, in_use=256, p90_ms=55.0, concurrency_limit=10), seen("ok"))
    assert ceiling.sets["concurrency_current"] == 10, "never above the ceiling"


def test_a_fixed_destinations_ramp_grows_slowly_near_the_throttled_limit_and_ends_at_its_limit():
    ramp = row(concurrency_limit=80, concurrency_current=63, concurrency_throttled_at=64,
               concurrency_changed_at=NOW - timedelta(seconds=1), window_started_at=NOW - timedelta(seconds=1),
               window_due=True, in_use=63, p90_ms=50.0, best_p90_ms=50.0)
    assert flow.advance(ramp, seen("ok")).sets["concurrency_current"] == 63, "one below the throttled 64: slowly"
    later = replace(ramp, concurrency_changed_at=NOW - timedelta(seconds=flow.SLOW_GROWTH))
    assert flow.advance(later, seen("ok")).sets["concurrency_current"] == 64
    fast = replace(ramp, concurrency_current=40)
    assert flow.advance(fast, seen("ok")).sets["concurrency_current"] == 41
    done = flow.advance(replace(fast, concurrency_limit=41), seen("ok"))
    assert done.sets["concurrency_current"] is None, "back at its limit: the ramp is over"


def test_the_breaker_opens_within_a_few_failed_calls_after_a_long_healthy_stretch():
    healthy = row(breaker=BREAKER, breaker_calls=5000.0, breaker_failure_score=0.0,
                  breaker_scored_at=NOW - timedelta(seconds=0.1))
    score, opened_after = 0.0, None
    for n in range(1, 40):
        score = flow.failure_score(score, 1, 1, 20)
        if score > 0.5:
            opened_after = n
            break
    assert opened_after is not None and opened_after <= 14
    change = flow.advance(healthy, seen(*["failed"] * 14))
    assert change.opened and change.sets["breaker_state"] == "open"
    assert change.sets["breaker_open_until"] == NOW + timedelta(seconds=30)
    assert not flow.advance(healthy, seen(*["failed"] * 5, *["ok"] * 5)).opened


def test_too_few_calls_do_not_open_the_breaker():
    fresh = row(breaker=BREAKER)
    assert not flow.advance(fresh, seen(*["failed"] * 10)).opened, "fewer than min_calls"


def test_a_half_open_breaker_closes_on_its_probes_success_and_reopens_on_its_failure():
    half = row(breaker=BREAKER, breaker_state="half_open", breaker_open_until=NOW - timedelta(seconds=1),
               breaker_probe_step=100)
    closed = flow.advance(half, seen("ok"))
    assert closed.sets["breaker_state"] == "closed" and closed.sets["breaker_open_until"] is None
    reopened = flow.advance(half, seen("failed"))
    assert reopened.sets["breaker_state"] == "open"
    assert reopened.sets["breaker_open_until"] == NOW + timedelta(seconds=30)
    other = flow.advance(replace(half, breaker_probe_step=7), seen("ok"))
    assert other.sets["breaker_state"] == "half_open", "only the probe's answer decides"


def verdict(**given) -> flow.Verdict:
    return replace(flow.Verdict("api", 2, None, "429, Retry-After 10", None), **given)


def test_a_throttled_step_waits_for_the_cooldown_up_to_max_throttled_waits():
    until = NOW + timedelta(seconds=10)
    outcome = flow.judge(failed("HTTP 429"), "throttled", 0, verdict(cooling_until=until))
    assert outcome.kind == "wait" and outcome.throttled and outcome.due_at == until
    assert outcome.reason == "throttled by api until 2026-12-03T12:00:10.000+00:00 (429, Retry-After 10)"
    assert flow.judge(failed("HTTP 429"), "throttled", 2, verdict(cooling_until=until)).kind == "failed", \
        "out of throttled waits: a failed attempt"


def test_a_failed_call_while_the_breaker_is_open_waits_without_an_attempt():
    until = NOW + timedelta(seconds=30)
    outcome = flow.judge(failed("HTTP 500"), "failed", 0, verdict(breaker_open_until=until))
    assert outcome.kind == "wait" and not outcome.throttled and outcome.due_at == until
    assert outcome.reason.startswith("destination api is failing: circuit open until 2026-12-03T12:00:30")
    assert flow.judge(failed("HTTP 500"), "failed", 0, verdict()).kind == "failed", "closed: an attempt"


def test_a_cooldown_resumes_at_the_concurrency_that_carried_the_accepted_rate_when_known():
    # 200 calls/s accepted at 52 ms each: about 10.4 in flight carried them.
    change = flow.advance(row(carried=10.4), seen("throttled", asked=1.0))
    assert change.sets["concurrency_current"] == 10, "the concurrency that carried it (CARRIED_SHARE 1.0)"
    assert change.sets["concurrency_throttled_at"] == 64, "growing slowly only near the limit that was cut ..."
    again = flow.advance(row(carried=10.4, concurrency_current=14), seen("throttled", asked=1.0))
    assert (again.sets["concurrency_current"], again.sets["concurrency_throttled_at"]) == (10, 11), \
        "... or, when a ramp was cut, right above where it resumes"
    assert flow.advance(row(carried=0.2), seen("throttled")).sets["concurrency_current"] == 1, "not below the floor"
    assert flow.advance(row(carried=500.0), seen("throttled")).sets["concurrency_current"] == 63, "below the cut"
