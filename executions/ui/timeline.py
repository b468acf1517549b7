"""The execution's timeline: a Gantt chart of its steps and their attempts, as inline SVG.

One row per step (in creation order); along it, what the step was doing when, from its
status transitions in the event log (selectors/runs.py says what is recorded):

- ``queued``   READY and due: waiting for a worker or a destination slot;
- ``running``  RUNNING, one bar per attempt (its number in the bar's title);
- ``backoff``  READY after a failed attempt, until its retry is due;
- ``waiting``  a timer, a deferral, or WAITING for children, a callback, an event;
- the end: a mark in the colour of SUCCEEDED, FAILED or CANCELLED.

A step whose events were left off is drawn from its row: queued from its creation to its
first start, ``earlier`` (attempts before the latest, not told apart) to its latest
attempt's start, then running to its end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils.html import escape

from executions.models import Step
from executions.selectors.runs import Transition
from executions.selectors.steps import TIMED_WAITS
from executions.ui import present

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
WIDTH, LABEL_W, ROW_H, AXIS_H = 880, 150, 22, 22
KINDS = ("queued", "running", "backoff", "waiting", "earlier")


@dataclass(frozen=True)
class Segment:
    kind: str
    start: datetime
    end: datetime
    attempt: int | None = None
    note: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Lane:
    vertex: str
    status: str
    segments: list[Segment]
    ended: datetime | None  # when it reached its final status, if it has


def lanes(steps: Iterable[Step], transitions: Iterable[Transition], now: datetime) -> list[Lane]:
    by_step: dict[int, list[Transition]] = {}
    for t in transitions:
        by_step.setdefault(t.step_id, []).append(t)
    return [_lane(step, by_step.get(step.pk, []), now) for step in steps]


def _lane(step: Step, moves: list[Transition], now: datetime) -> Lane:
    if not moves:
        return _from_row(step, now)
    segments: list[Segment] = []
    status, since, kind, attempt, note = "READY", step.created_at, "queued", None, ""
    last_run_attempt = 0
    for move in moves:
        segments.append(Segment(kind, since, max(move.at, since), attempt, note))
        status, since, note, attempt = move.to_status, move.at, move.message, move.attempt
        if status == "RUNNING":
            kind = "running"
            last_run_attempt = move.attempt or last_run_attempt
        elif status == "READY":
            retried = move.from_status == "RUNNING" and (move.attempt or 0) > last_run_attempt > 0
            timed = any(prefix in note.lower() for prefix, _ in TIMED_WAITS)
            kind = "backoff" if retried else "waiting" if timed else "queued"
        else:
            kind = "waiting"
    ended = since if status in TERMINAL else None
    if ended is None:
        segments.append(Segment(kind, since, max(now, since), attempt, note))
    return Lane(step.vertex, step.status, [s for s in segments if s.seconds > 0 or s.kind == "running"], ended)


def _from_row(step: Step, now: datetime) -> Lane:
    end = step.finished_at or now
    segments = []
    first, latest = step.started_at, step.attempt_started_at or step.started_at
    if first is None:
        return Lane(step.vertex, step.status, [Segment("queued", step.created_at, end)], step.finished_at)
    segments.append(Segment("queued", step.created_at, first))
    if latest and latest > first:
        segments.append(Segment("earlier", first, latest, note=f"attempts 1–{step.attempt - 1}"))
    segments.append(Segment("running", latest or first, end, step.attempt))
    return Lane(step.vertex, step.status, [s for s in segments if s.seconds > 0], step.finished_at)


def svg(rows: list[Lane], began: datetime, end: datetime) -> str:
    """The chart; x is time from ``began`` to ``end``."""
    span = max((end - began).total_seconds(), 0.001)
    plot = WIDTH - LABEL_W - 10
    height = AXIS_H + ROW_H * max(1, len(rows)) + 4

    def x(at: datetime) -> float:
        return LABEL_W + plot * min(max((at - began).total_seconds() / span, 0.0), 1.0)

    parts = [f'<svg class="timeline-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" role="img" aria-label="Timeline of the steps and their attempts">']
    for tick in range(5):
        tx = LABEL_W + plot * tick / 4
        parts.append(f'<line class="tick" x1="{tx:g}" y1="{AXIS_H - 4}" x2="{tx:g}" y2="{height}"/>'
                     f'<text class="tick-label" x="{tx:g}" y="{AXIS_H - 8}">'
                     f'{"0" if tick == 0 else "+" + present.duration(span * tick / 4)}</text>')
    for number, lane in enumerate(rows):
        y = AXIS_H + number * ROW_H
        parts.append(f'<g class="lane" data-vertex="{escape(lane.vertex)}" data-status="{lane.status}">'
                     f'<text class="lane-label" x="{LABEL_W - 8}" y="{y + 15}">{escape(lane.vertex[:22])}</text>')
        for seg in lane.segments:
            x1, x2 = x(seg.start), x(seg.end)
            title = f"{lane.vertex}: {seg.kind}" + (f" (attempt {seg.attempt})" if seg.kind == "running" and seg.attempt
                                                    else "") + f", {present.duration(seg.seconds)}"
            if seg.note and seg.kind != "running":
                title += f" — {seg.note[:160]}"
            attempt = f' data-attempt="{seg.attempt}"' if seg.kind == "running" and seg.attempt else ""
            parts.append(f'<rect class="span span-{seg.kind}" x="{x1:g}" y="{y + 4}" width="{max(x2 - x1, 1.5):g}" '
                         f'height="{ROW_H - 8}" data-kind="{seg.kind}"{attempt}><title>{escape(title)}</title></rect>')
        if lane.ended is not None:
            ex = x(lane.ended)
            parts.append(f'<rect class="end end-{lane.status.lower()}" x="{ex - 2:g}" y="{y + 2}" width="4" '
                         f'height="{ROW_H - 4}"><title>{escape(lane.vertex)}: {lane.status}</title></rect>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
