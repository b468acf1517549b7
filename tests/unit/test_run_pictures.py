"""The arithmetic of the execution view's pictures: the timeline's segments from a step's
status transitions (executions/ui/timeline.py) and the throughput chart's buckets, rate and
ETA (executions/selectors/throughput.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from executions.models import Step
from executions.selectors import throughput
from executions.selectors.runs import Transition
from executions.selectors.throughput import Bucket
from executions.ui import timeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def move(from_status: str, to_status: str, attempt: int, seconds: float, message: str = "") -> Transition:
    return Transition(1, from_status, to_status, attempt, at(seconds), message)


def step_row(**fields) -> Step:
    return Step(pk=1, vertex="charge", status=fields.pop("status", "SUCCEEDED"), created_at=T0, **fields)


def test_a_retried_step_has_one_bar_per_attempt_and_its_backoff_between() -> None:
    moves = [move("READY", "RUNNING", 1, 2), move("RUNNING", "READY", 2, 3, "HTTP 503; retry in 5 s"),
             move("READY", "RUNNING", 2, 8), move("RUNNING", "SUCCEEDED", 2, 9.5)]
    [lane] = timeline.lanes([step_row()], moves, now=at(30))
    assert [(s.kind, s.attempt, s.seconds) for s in lane.segments] == [
        ("queued", None, 2.0), ("running", 1, 1.0), ("backoff", 2, 5.0), ("running", 2, 1.5)]
    assert lane.ended == at(9.5)


def test_an_open_step_runs_to_now_and_a_wait_is_a_wait() -> None:
    moves = [move("READY", "RUNNING", 1, 1), move("RUNNING", "WAITING", 1, 2, "waiting for children"),
             move("WAITING", "READY", 1, 5, "children decided the merge"), move("READY", "RUNNING", 1, 6)]
    [lane] = timeline.lanes([step_row(status="RUNNING")], moves, now=at(7))
    assert [(s.kind, s.seconds) for s in lane.segments] == [
        ("queued", 1.0), ("running", 1.0), ("waiting", 3.0), ("queued", 1.0), ("running", 1.0)]
    assert lane.ended is None


def test_a_timer_is_waiting_not_a_backoff() -> None:
    moves = [move("READY", "RUNNING", 1, 0), move("RUNNING", "READY", 1, 1, "timer: 10 s"),
             move("READY", "RUNNING", 1, 11), move("RUNNING", "SUCCEEDED", 1, 11)]
    [lane] = timeline.lanes([step_row()], moves, now=at(60))
    assert [s.kind for s in lane.segments] == ["running", "waiting", "running"]


def test_a_step_without_events_is_drawn_from_its_row() -> None:
    row = step_row(status="SUCCEEDED", attempt=3, started_at=at(1), attempt_started_at=at(20), finished_at=at(21))
    [lane] = timeline.lanes([row], [], now=at(60))
    assert [(s.kind, s.seconds) for s in lane.segments] == [("queued", 1.0), ("earlier", 19.0), ("running", 1.0)]
    assert lane.segments[1].note == "attempts 1–2"


def test_the_svg_draws_each_segment_and_the_end() -> None:
    moves = [move("READY", "RUNNING", 1, 2), move("RUNNING", "FAILED", 1, 4)]
    drawn = timeline.svg(timeline.lanes([step_row(status="FAILED")], moves, now=at(9)), T0, at(4))
    assert drawn.count('data-kind="running"') == 1 and 'data-attempt="1"' in drawn
    assert 'class="end end-failed"' in drawn


@pytest.mark.parametrize(("span", "width"), [(0, 1), (30, 1), (60, 1), (61, 2), (299, 10), (3600, 60),
                                              (3601, 120), (86400 * 3, 7200), (86400 * 200, 345600)])
def test_the_bucket_width_is_round_and_keeps_the_chart_to_sixty_bars(span, width) -> None:
    assert throughput.bucket_width(span) == width
    assert span / width <= throughput.MAX_BUCKETS


def test_buckets_are_filled_and_clamped_to_the_span() -> None:
    found = throughput.filled([(0, 2, 1, 0), (3, 1, 0, 0), (-1, 1, 0, 0), (9, 0, 0, 4)], width=5, span=20)
    assert [(b.start, b.succeeded, b.failed, b.cancelled) for b in found] == [
        (0.0, 3, 1, 0), (5.0, 0, 0, 0), (10.0, 0, 0, 0), (15.0, 1, 0, 4)]
    assert sum(b.finished for b in found) == 9  # every row counted once


def test_the_recent_rate_counts_the_partly_covered_bucket_pro_rata_and_the_eta_follows() -> None:
    buckets = [Bucket(0.0, 100, 0, 0), Bucket(10.0, 40, 10, 0), Bucket(20.0, 6, 0, 0)]  # span 25: last bucket half
    # The last 10 s: half of the second bucket (25) and all of the third (6, over 5 s).
    assert throughput.recent_rate(buckets, 10, 25.0, 10.0) == pytest.approx(3.1)
    assert throughput.recent_rate(buckets, 10, 25.0, 60.0) == pytest.approx(156 / 25)  # window longer than the span
    assert throughput.eta_seconds(62, 3.1) == pytest.approx(20.0)
    assert throughput.eta_seconds(5, 0.0) is None and throughput.eta_seconds(0, 0.0) == 0.0
