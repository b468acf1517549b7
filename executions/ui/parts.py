"""The execution view's live fragments: header, step timeline, fan-out panel, children
table and long tail. Each builder reads what its fragment shows and renders it; the full
page is these same fragments put together, so a first poll after page load finds nothing
changed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from executions import selectors
from executions.fanout import edits, recovery
from executions.models import Event, Execution, Step, StepStatus
from executions.selectors.destinations import Slots
from executions.selectors.fanouts import FanOutView, Tail
from executions.services import lifecycle as services
from executions.ui import access, children_table, present, view_state
from executions.ui.access import UiRequest
from executions.ui.responses import Fragment, Poll, fingerprint, render_fragment
from workflows import sudo

EVENTS_SHOWN = 200
LONG_TAIL_POLL_SECONDS = 5
LONG_TAIL_REFRESH_SECONDS = 15
LONG_TAIL_CACHE_SECONDS = 600


def _url(name: str, *args: Any, **query: Any) -> str:
    base = reverse(f"ui:{name}", args=args)
    query = {k: v for k, v in query.items() if v not in ("", None)}
    return f"{base}?{urlencode(query)}" if query else base


def _has_active_children(views: list[FanOutView]) -> bool:
    return any(view.active for view in views)


# --- header -------------------------------------------------------------------------------------

def header(request: UiRequest, execution: Execution) -> Fragment:
    output = selectors.payloads.preview(execution.pk, execution.output_vertex)
    input_edits = selectors.steps.input_edits(execution)
    context = {
        "e": execution,
        "duration": present.elapsed_rounds(execution.started_at, execution.attempt_started_at,
                                           execution.finished_at, execution.attempt),
        "lineage": [(a, a.workflow.key) for a in selectors.executions.lineage(execution)],
        "chained_from": selectors.executions.chained_from(execution),
        "chained_to": selectors.executions.chained_to(execution),
        "output": output,
        "output_size": present.size(output.size_bytes) if output else "",
        "workflow_admin": reverse("admin:workflows_workflowdefinition_change", args=[execution.workflow_id]),
        "version_admin": reverse("admin:workflows_workflowversion_change", args=[execution.version_id]),
        "can_operate": access.can_operate(request, execution),
        "reserved": sudo.is_reserved(execution.workflow.key),
        "input_edits": input_edits,
        # Issue 33 §3: what the last edit changed; the failed siblings of a child.
        "input_diff": selectors.identity.input_diff(execution.pk) if input_edits else None,
        "failed_siblings": selectors.identity.failed_siblings(execution),
        "tags": sorted((execution.tags or {}).items()),
        "pause": selectors.pauses.of_execution(execution, count=False),  # issue 31: the banner and Pause / Resume
    }
    # A finished parent stays live while retried children run: its merge output follows them.
    live = not execution.is_terminal or selectors.executions.has_active_children(execution)
    poll = Poll("execution-header", _url("execution-header", execution.pk), live=live)
    return render_fragment(request, "ui/execution/_header.html", context, poll)


# --- body: the panels that come and go with the run ------------------------------------------------

def body_version(execution: Execution) -> str:
    """The body's fingerprint: its structure (selectors.executions.structure), not its content."""
    return fingerprint(selectors.executions.structure(execution))


def body(request: UiRequest, execution: Execution, version: str | None = None) -> Fragment:
    """The input (and its edit form), the fan-out panels with their children tables, the
    downloads and the long tail: re-rendered when one of them appears or goes, so a page
    opened before the spawner ran grows with the run (each panel then polls itself)."""
    views = selectors.fanouts.of(execution, waiting=True)  # the panels show the waiting children
    merges = selectors.steps.named(execution, [v.merge_vertex for v in views if v.merge_vertex])
    preview = selectors.payloads.preview(execution.pk, "input")
    purged_at = selectors.executions.payloads_purged_at(execution)
    context = {
        "e": execution,
        "fanouts": [(fanout_panel(request, execution, v, merges.get(v.merge_vertex or "")),
                     children(request, execution, v, **view_state.children(request, v.spawner_vertex)), v)
                    for v in views],
        # The long tail reads every finished child; it loads right after the page instead
        # of holding it up (then polls like the other fragments).
        "long_tail_url": reverse("ui:execution-long-tail", args=[execution.pk]) if views else None,
        # Error groups and bulk operations (issue 31 §5, 33 §3): loaded after the page, too.
        "bulk_url": reverse("ui:execution-bulk", args=[execution.pk]) if views else None,
        "input": preview,
        "can_edit_retry": execution.status == "FAILED" and access.can_operate(request, execution),
        "can_edit_fanouts": not execution.is_terminal and access.can_operate(request, execution),
        "input_size": present.size(preview.size_bytes) if preview else "",
        "payloads_purged_at": purged_at,
    }
    poll = Poll("execution-body", _url("execution-body", execution.pk), live=not execution.is_terminal)
    key = selectors.executions.structure_key(execution, [v.spawner_vertex for v in views],
                                             preview.size_bytes if preview else None, purged_at)
    return render_fragment(request, "ui/execution/_body.html", context, poll, version=version or fingerprint(key))


# --- step timeline ------------------------------------------------------------------------------

@dataclass
class StepRow:
    step: Step
    kind: str
    duration: str
    wait: str
    wait_why: str
    events: list[Event]
    retryable: bool
    display_status: str = ""  # WAITING for a READY step deferred to a due time (S7)
    next_check: datetime | None = None
    confirm: str = ""  # the retry's confirmation, when it says more than "Retry step …?"
    outside: Any = None  # a wait for the outside world (selectors.waits.WaitView)


def steps(request: UiRequest, execution: Execution) -> Fragment:
    rows = selectors.steps.of(execution)
    shown = selectors.steps.events(execution, limit=EVENTS_SHOWN)
    by_step: dict[int | None, list[Event]] = defaultdict(list)
    for event in shown:
        by_step[event.step_id].append(event)
    vertices = (execution.version.dsl or {}).get("vertices", {})
    slots = selectors.destinations.slots(sorted({s.destination_id for s in rows
                                                 if s.destination_id and _may_wait_for_slot(s)}))
    step_rows = [_step_row(s, vertices.get(s.vertex, {}).get("type", ""), by_step[s.pk], slots, execution)
                 for s in rows]
    _spawners_of_failed_merges(execution, vertices, step_rows)
    context = {
        "e": execution,
        "rows": step_rows,
        "execution_events": by_step[None],
        "events_truncated": len(shown) >= EVENTS_SHOWN,
        "events_shown": EVENTS_SHOWN,
        "can_operate": access.can_operate(request, execution),
    }
    poll = Poll("execution-steps", _url("execution-steps", execution.pk), live=not execution.is_terminal)
    return render_fragment(request, "ui/execution/_steps.html", context, poll)


def _spawners_of_failed_merges(execution: Execution, vertices: dict[str, Any], rows: list[StepRow]) -> None:
    """S28: a SPAWNER step whose failFast MERGE failed can be retried (its failed and failFast-cancelled
    children re-run, its never-started items spawned) although it SUCCEEDED; its button says
    how many before the operator confirms."""
    if execution.status != "FAILED":
        return
    status = {row.step.vertex: row.step.status for row in rows}
    merged = {v.get("spawner"): status.get(vid) for vid, v in vertices.items()
              if v.get("type") == "MERGE" and (v.get("config") or {}).get("failFast")}
    for row in rows:
        if row.kind == "SPAWNER" and row.step.status != StepStatus.FAILED and \
                merged.get(row.step.vertex) == StepStatus.FAILED:
            counts = services.retry_failed_preview(execution, spawner=row.step.vertex)
            row.retryable = counts.retried > 0
            row.confirm = present.retry_confirm(counts, row.step.vertex)


def _may_wait_for_slot(step: Step) -> bool:
    return step.status == StepStatus.READY and step.destination_id is not None and step.due_at <= timezone.now()


def _step_row(step: Step, kind: str, events: list[Event], slots: dict[int, Slots],
              execution: Execution) -> StepRow:
    wait, why = wait_reason(step, slots)
    waiting = selectors.steps.waiting(step)
    took = present.elapsed_rounds(step.started_at, step.attempt_started_at, step.finished_at, step.attempt)
    return StepRow(step=step, kind=kind, duration=took, wait=wait,
                   wait_why=why, events=events,
                   retryable=step.status == StepStatus.FAILED and execution.status == "FAILED",
                   display_status=selectors.steps.display_status(step),
                   next_check=waiting.next_check_at if waiting else None,
                   outside=getattr(step, "outside_wait", None) if step.status == StepStatus.WAITING else None)


def wait_reason(step: Step, slots: dict[int, Slots]) -> tuple[str, str]:
    """(what the step waits for, in words) — timer, retry backoff, quota, payload pressure,
    a destination slot, its children — or ("", "") when it is not waiting."""
    found = selectors.steps.waiting(step)
    if found is not None:
        return found.kind, found.reason
    if step.status != StepStatus.READY:
        return "", ""
    slot = slots.get(step.destination_id) if step.destination_id else None
    if slot is not None and slot.held:
        return "destination flow", slot.held
    if slot is not None and slot.saturated:
        return "destination slot", (f"destination '{slot.name}' has no free slot "
                                    f"({slot.in_flight:,} in flight, limit {slot.limit:,})")
    return "worker", "due now; waiting for a worker to claim it"


# --- fan-out panel ------------------------------------------------------------------------------

CHILD_STATUSES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
SEGMENTS = (("succeeded", "SUCCEEDED"), ("failed", "FAILED"), ("cancelled", "CANCELLED"), ("running", "RUNNING"),
            ("pending", "PENDING"), ("never_started", "NEVER_STARTED"))


# The RUNNING children apart: running now, waiting for a destination's slot, waiting for a
# retry's backoff (selectors.fanouts.WAITING_CHILDREN) — each card filters the RUNNING children.
WAITING_CARDS = (("waiting", "WAITING_SLOT", "waiting for a slot"), ("waiting", "WAITING_RETRY", "waiting for a retry"))


def _count_cards(view: FanOutView, counts: dict[str, int]) -> list[tuple[str, str, str, str]]:
    """(css, data-count, number, label) per card, in the progress bar's order."""
    cards = []
    for css, status in SEGMENTS:
        if status == "RUNNING":
            cards.append((css, status, present.count(view.running_now), "running"))
            cards += [(c, name, present.count(n), label) for (c, name, label), n
                      in zip(WAITING_CARDS, (view.waiting_slot, view.waiting_retry), strict=True)]
        else:
            cards.append((css, status, present.count(counts[status]), status.lower().replace("_", " ")))
    return cards


def fanout_panel(request: UiRequest, execution: Execution, view: FanOutView, merge: Step | None) -> Fragment:
    total = view.total or 1
    counts = view.counts()
    # What "Retry all failed" re-runs. S28's extra (the children failFast cancelled, the items
    # never started) exists only once the merge failed, so the parent is FAILED and the panel
    # no longer polls: only then is it counted; while it runs, the O(1) counter says it.
    if execution.status == "FAILED" and (view.failed or view.cancelled):
        rerun = services.retry_failed_preview(execution, spawner=view.spawner_vertex)
    else:
        rerun = recovery.Counts(failed=view.failed)
    context = {
        "e": execution,
        "f": view,
        "segments": [(css, status, counts[status], f"{100.0 * counts[status] / total:.3f}")
                     for css, status in SEGMENTS if counts[status]],
        "counts": _count_cards(view, counts),
        "percent": f"{view.percent:.1f}",
        "total": present.count(view.total), "failed": present.count(view.failed),
        "rerun": present.count(rerun.retried), "rerun_confirm": present.retry_confirm(rerun, view.spawner_vertex),
        "can_rerun": rerun.retried > 0,
        "open": counts["PENDING"] + counts["RUNNING"],
        "created": present.count(view.created),
        "verdict": verdict(view),
        "outcome": outcome(view),
        "merge": merge,
        "children_url": _url("execution-children", execution.pk, view.spawner_vertex),
        "can_operate": access.can_operate(request, execution),
        "edits": [(e, edits.describe(e["changes"]))  # issue 31: "edited by … at …: maxConcurrency 50 → 10"
                  for e in (selectors.pauses.fanout_edits(execution).get(view.spawner_vertex, [])
                            if view.edited else [])],
    }
    live = not execution.is_terminal or _has_active_children([view])
    poll = Poll(f"fanout-{view.spawner_vertex}", _url("execution-fanout", execution.pk, view.spawner_vertex), live)
    return render_fragment(request, "ui/execution/_fanout.html", context, poll)


def verdict(view: FanOutView) -> str:
    """The merge rule in words, e.g. "3 failed of 1,000; tolerance 5% allows 50; failFast on"."""
    if view.cancelled:
        parts = [f"{view.failed:,} failed and {view.cancelled:,} cancelled of {view.total:,}"]
    else:
        parts = [f"{view.failed:,} failed of {view.total:,}"]
    if view.tolerated:
        scope = "" if view.tolerated == ["FAILED"] else f" ({' and '.join(s.lower() for s in view.tolerated)})"
        parts.append(f"tolerance {present.ratio_percent(view.max_failure_ratio)}{scope} "
                     f"allows {view.allowed_failures:,}")
    else:
        parts.append("no failure tolerated")
    parts.append(f"failFast {'on' if view.fail_fast else 'off'}")
    return "; ".join(parts)


def outcome(view: FanOutView) -> str:
    """Where the merge stands, from the database's verdicts (merge_rule.py), never
    re-derived from the counts here."""
    if view.decided:
        result = "fails" if view.exceeded else "succeeds"
        early = "" if view.finished else " before every child ended (failFast)"
        return f"Decided{early}: the merge {result}."
    if view.exceeded:
        return "Not decided yet: more failures than tolerated so far; without failFast the merge waits for every child."
    return "Not decided yet: within the tolerance so far."


# --- children table: executions/ui/children_table.py -------------------------------------------

children = children_table.children


# --- long tail ----------------------------------------------------------------------------------

CHART_WIDTH, CHART_HEIGHT = 600, 120


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str


def long_tail(request: UiRequest, execution: Execution, views: list[FanOutView]) -> Fragment:
    tail, computed_at = _cached_long_tail(execution, views)
    context = {
        "e": execution,
        "tail": tail,
        "p50": present.duration(tail.p50), "p95": present.duration(tail.p95), "p99": present.duration(tail.p99),
        "max": present.duration(tail.max), "finished": present.count(tail.count),
        "bars": histogram(tail.buckets),
        "markers": markers(tail),
        "chart_width": CHART_WIDTH, "chart_height": CHART_HEIGHT,
        "axis_end": present.duration(tail.buckets[-1][1]) if tail.buckets else "",
        "slowest": [(c, present.duration(c.seconds)) for c in tail.slowest],
        "computed_at": computed_at,
    }
    live = not execution.is_terminal or _has_active_children(views)
    poll = Poll("execution-long-tail", _url("execution-long-tail", execution.pk), live, every=LONG_TAIL_POLL_SECONDS)
    return render_fragment(request, "ui/execution/_long_tail.html", context, poll)


def _cached_long_tail(execution: Execution, views: list[FanOutView]) -> tuple[Tail, datetime]:
    """The long tail reads every finished child (~0.1 s at 100,000), so it is computed again
    only when children finished since, and while they keep finishing at most every
    ``LONG_TAIL_REFRESH_SECONDS`` (the panel says when it was computed)."""
    finished = tuple((v.spawner_vertex, v.succeeded, v.failed, v.cancelled) for v in views)
    key = long_tail_cache_key(execution.pk)
    cached = cache.get(key)
    now = timezone.now()
    if cached is not None:
        fresh = cached["finished"] == finished
        recent = (now - cached["at"]).total_seconds() < LONG_TAIL_REFRESH_SECONDS
        if fresh or (recent and _has_active_children(views)):
            return cached["tail"], cached["at"]
    tail = selectors.fanouts.long_tail(execution.pk)
    cache.set(key, {"finished": finished, "at": now, "tail": tail}, timeout=LONG_TAIL_CACHE_SECONDS)
    return tail, now


def long_tail_cache_key(execution_id: Any) -> str:
    return f"sb-ui:long-tail:{execution_id}"


@dataclass
class Marker:
    name: str
    x: float
    label_y: int


def markers(tail: Tail) -> list[Marker]:
    """Where p50, p95 and p99 fall on the chart's x axis (labels stepped so they never overlap)."""
    if not tail.buckets or not tail.buckets[-1][1]:
        return []
    end = tail.buckets[-1][1]
    found = [("p50", tail.p50), ("p95", tail.p95), ("p99", tail.p99)]
    return [Marker(name, max(8.0, CHART_WIDTH * value / end), 9 + 11 * i)
            for i, (name, value) in enumerate(found) if value is not None]


def histogram(buckets: list[tuple[float, float, int]]) -> list[Bar]:
    """Bars of an inline SVG chart, heights scaled to the fullest bucket."""
    if not buckets:
        return []
    top = max(n for _, _, n in buckets) or 1
    width = CHART_WIDTH / len(buckets)
    bars = []
    for i, (lo, hi, n) in enumerate(buckets):
        height = 0.0 if n == 0 else max(1.0, (CHART_HEIGHT - 4) * n / top)
        bars.append(Bar(i * width + 1, CHART_HEIGHT - height, width - 2, height,
                        f"{present.duration(lo)} – {present.duration(hi)}: {n:,} children"))
    return bars
