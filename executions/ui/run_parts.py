"""The execution view's pictures, each a live fragment (responses.py): the run panel — the
version graph coloured by this execution's step statuses, with its fan-outs' counts, and the
timeline of its steps and attempts — and, under each fan-out panel, its throughput chart.

Both read bounded, pre-aggregated data: the run panel the execution's steps, their status
transitions (one indexed read of the event log, capped) and the fan-out counters the count
cards use; the throughput chart one index-only scan of the finished children's
(parent, spawn_vertex, finished_at) index entries (selectors/throughput.py), never a child row.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from executions import selectors
from executions.models import Execution
from executions.selectors import runs, throughput
from executions.selectors.fanouts import FanOutView
from executions.ui import graph, present, throughput_chart, timeline
from executions.ui.access import UiRequest
from executions.ui.responses import Fragment, Poll, render_fragment
from workflows import dsl

RUN_POLL_SECONDS = 3
THROUGHPUT_POLL_SECONDS = 5


def run_panel(request: UiRequest, execution: Execution) -> Fragment:
    now = timezone.now()
    steps = runs.steps(execution)
    moves, truncated = runs.transitions(execution)
    views = selectors.fanouts.of(execution)
    live = not execution.is_terminal or any(v.active for v in views)
    overlay = graph.Overlay(
        statuses={s.vertex: selectors.steps.display_status(s, now) for s in steps},
        counts=_fanout_counts(views),
        links={vertex: reverse("ui:version-detail", args=[key, digest])
               for vertex, (key, digest) in runs.child_versions(execution).items()},
    )
    picture = graph.svg(dsl.parse(execution.version.dsl), overlay)
    began = min([execution.created_at, *(s.created_at for s in steps)])
    end = now if live or not execution.finished_at else max(
        [execution.finished_at, *(m.at for m in moves)])
    lanes = timeline.lanes(steps, moves, end)
    context = {
        "e": execution,
        "graph": mark_safe(picture),  # noqa: S308 - built by graph.svg, every text escaped
        "timeline": mark_safe(timeline.svg(lanes, began, end)),  # noqa: S308 - built by timeline.svg, escaped
        "span": present.duration((end - began).total_seconds()),
        "attempts": sum(1 for lane in lanes for seg in lane.segments if seg.kind == "running"),
        "truncated": truncated, "shown": runs.TRANSITIONS_SHOWN,
        "kinds": timeline.KINDS,
    }
    poll = Poll("execution-run", reverse("ui:execution-run", args=[execution.pk]), live, every=RUN_POLL_SECONDS)
    return render_fragment(request, "ui/execution/_run.html", context, poll)


def _fanout_counts(views: list[FanOutView]) -> dict[str, dict[str, int]]:
    """The counters of each fan-out, on its SPAWNER and its MERGE vertex."""
    found: dict[str, dict[str, int]] = {}
    for view in views:
        counts = {"succeeded": view.succeeded, "failed": view.failed, "running": view.running,
                  "pending": view.pending, "cancelled": view.cancelled}
        found[view.spawner_vertex] = counts
        if view.merge_vertex:
            found[view.merge_vertex] = counts
    return found


def throughput_panel(request: UiRequest, execution: Execution, view: FanOutView) -> Fragment:
    live = view.active or not view.spawn_complete
    data = throughput.of_fanout(execution.pk, view.spawner_vertex, running=live, finished=view.done)
    remaining = max(0, view.total - view.done - view.never_started)
    rate = data.recent_rate()
    eta = throughput.eta_seconds(remaining, rate) if live else None
    context = {
        "e": execution, "f": view, "data": data,
        "chart": mark_safe(throughput_chart.svg(view.spawner_vertex, data)),  # noqa: S308 - every text escaped
        "width": present.duration(data.width), "span": present.duration(data.span),
        "finished": present.count(data.finished), "failed": present.count(data.failed),
        "live": live, "remaining": present.count(remaining), "rate": _rate(rate),
        "eta": present.duration(eta) if eta else "", "eta_at": _eta_at(eta),
        "mean_rate": _rate(data.finished / data.span if data.span else 0.0),
    }
    url = reverse("ui:execution-throughput", args=[execution.pk, view.spawner_vertex])
    poll = Poll(f"throughput-{view.spawner_vertex}", url, not execution.is_terminal or view.active,
                every=THROUGHPUT_POLL_SECONDS)
    return render_fragment(request, "ui/execution/_throughput.html", context, poll)


def _rate(per_second: float) -> str:
    if per_second >= 10:
        return f"{per_second:,.0f}/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    return f"{per_second * 60:.1f}/min" if per_second else "0/s"


def _eta_at(eta: float | None) -> datetime | None:
    return timezone.now() + timedelta(seconds=eta) if eta else None

