"""The Rate Limits page (S11): every destination with its concurrency limit and live
counts; create a destination; edit a limit inline. Counts refresh by polling one small
fragment whose cells are swapped out-of-band, so a row being edited is left alone."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from executions import extensions, selectors
from executions.destinations import credentials as credential_rules
from executions.destinations import rules as destination_services
from executions.models import Destination
from executions.ui import access, charts, flow_state, forms, present
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import CHANGED_EVENT, POLL_SECONDS
from workflows.audit import audited
from workflows.errors import Invalid
from workflows.models import Role


def _entries(rows: list[Destination]) -> list[dict[str, Any]]:
    """Each destination with its live count cells (its flow state among them)."""
    live = selectors.destinations.live_counts([d.pk for d in rows])
    return [{"d": d, "c": {**_count_cells(live.get(d.pk, {})), "flow": flow_state.now(d, live.get(d.pk, {}))},
             "credentials_problem": _credentials_problem(d)} for d in rows]


def _credentials_problem(destination: Destination) -> str:
    """Why stored credentials cannot be used (the key that sealed them is gone), or ''."""
    return credential_rules.problem(destination.credentials_sealed) if destination.credentials_kind else ""


def _count_cells(live: dict[str, Any]) -> dict[str, str]:
    calls, errors = live.get("calls") or 0, live.get("errors") or 0
    latency = [present.duration(ms / 1000) if ms is not None else "–" for ms in (live.get("p50_ms"),
                                                                                 live.get("p95_ms"))]
    return {
        "in_flight": present.count(live.get("in_flight") or 0),
        "waiting": present.count(live.get("waiting") or 0),
        "error_rate": f"{present.percent(errors, calls)} ({errors:,}/{calls:,})" if calls else "–",
        "latency": " / ".join(latency) if calls else "–",
    }


def _row_context(request: UiRequest, destination: Destination, **extra: Any) -> dict[str, Any]:
    entry = _entries([destination])[0]
    return {**entry, "can_operate": access.can_operate(request), **extra}


def _destination(request: UiRequest, destination_id: int) -> Destination:
    return selectors.destinations.by_id(request.principal.workspace, destination_id)


@require_GET
@workspace_view
def page(request: UiRequest) -> HttpResponse:
    rows = selectors.destinations.every(request.principal.workspace)
    return render(request, "ui/rate_limits.html", {
        "entries": _entries(rows), "form": forms.DestinationForm(),
        "can_operate": access.can_operate(request), "poll_seconds": POLL_SECONDS,
        "panels": _panels(request, rows), "storage": _storage(), "charts": _charts(rows),
        "chart_seconds": CHART_POLL_SECONDS,
    })


# The charts cover CHART_MINUTES in buckets of CHART_BUCKET_SECONDS and refresh every
# CHART_POLL_SECONDS (a bucket fills in 30 s: polling faster would redraw the same picture).
CHART_MINUTES, CHART_BUCKET_SECONDS, CHART_POLL_SECONDS = 15, 30, 15


def _charts(rows: list[Destination]) -> list[dict[str, Any]]:
    """A chart per destination that was called in the charts' window, by name: the limit as it
    was in each bucket, in flight, errors and throttled answers; and its sparklines."""
    found = selectors.destinations.history([d.pk for d in rows], minutes=CHART_MINUTES,
                                           bucket_seconds=CHART_BUCKET_SECONDS)
    shown = []
    for d in rows:
        buckets = found.get(d.pk, [])
        if not any(b.calls for b in buckets):
            continue
        limits = [b.limit for b in buckets]
        shown.append({"d": d, "svg": charts.flow_chart(d.name, buckets, limits, bucket_seconds=CHART_BUCKET_SECONDS),
                      "calls": sum(b.calls for b in buckets), "errors": sum(b.errors for b in buckets),
                      "throttled": sum(b.throttled for b in buckets), "sparklines": _sparklines(d, buckets)})
    return shown


def _sparklines(d: Destination, buckets: list[Any]) -> list[dict[str, Any]]:
    """In flight and waiting (the most sampled), errors and p95 latency per bucket (issue 33 §2);
    ``values`` as the page states them (data-values), oldest first."""
    series = [
        ("in-flight", "in flight", [b.in_flight for b in buckets], "#3182ce", present.count),
        ("waiting", "waiting", [b.waiting for b in buckets], "#d69e2e", present.count),
        ("errors", "errors", [b.errors for b in buckets], "#c53030", present.count),
        ("p95", "p95 latency", [None if b.p95_ms is None else round(b.p95_ms, 1) for b in buckets], "#1a365d",
         lambda ms: present.duration(ms / 1000)),
    ]
    out = []
    for key, label, values, color, shown in series:
        last = next((v for v in reversed(values) if v is not None), None)
        out.append({"key": key, "label": label, "color": color,
                    "values": ",".join("" if v is None else f"{v:g}" for v in values),
                    "last": "–" if last is None else shown(last),
                    "svg": charts.sparkline(f"{label} of {d.name} over the last {CHART_MINUTES} minutes", values,
                                            color=color)})
    return out


@require_GET
@workspace_view
def chart_panel(request: UiRequest) -> HttpResponse:
    rows = selectors.destinations.every(request.principal.workspace)
    return render(request, "ui/rate_limits/_charts.html",
                  {"charts": _charts(rows), "chart_seconds": CHART_POLL_SECONDS})


def _storage() -> dict[str, Any]:
    """The payload store's usage against its capacity and high-water mark (S7, S19)."""
    usage = selectors.payloads.store_usage()
    sb = settings.SB
    return {
        "used": present.size(usage.used_bytes), "capacity": present.size(usage.capacity_bytes),
        "percent": present.percent(usage.used_bytes, usage.capacity_bytes),
        "high_water": present.ratio_percent(usage.high_water),
        "high_water_bytes": present.size(int(usage.capacity_bytes * usage.high_water)),
        "used_bytes": usage.used_bytes, "capacity_bytes": usage.capacity_bytes,
        "high_water_at": int(usage.capacity_bytes * usage.high_water),
        "above": usage.above_high_water,
        "payload_days": present.duration(float(sb["PAYLOAD_RETENTION_SECONDS"])),
        "tree_days": present.duration(float(sb["RETENTION_SECONDS"])),
    }


def _panels(request: UiRequest, rows: list[Destination]) -> list[str]:
    """Panels that optional apps add above the table (the demo app: its ledger switch)."""
    return [html for app in extensions.rate_limits_panels() if (html := app.rate_limits_panel(request, rows))]


@require_GET
@workspace_view
def counts(request: UiRequest) -> HttpResponse:
    rows = selectors.destinations.every(request.principal.workspace)
    return render(request, "ui/rate_limits/_counts.html", {"entries": _entries(rows)})


@require_GET
@workspace_view
def row(request: UiRequest, destination_id: int) -> HttpResponse:
    return render(request, "ui/rate_limits/_row.html", _row_context(request, _destination(request, destination_id)))


@require_GET
@workspace_view
def edit_row(request: UiRequest, destination_id: int) -> HttpResponse:
    request.principal.require(Role.OPERATOR, "edit limits")
    destination = _destination(request, destination_id)
    form = forms.LimitForm(initial={"concurrency_limit": destination.concurrency_limit})
    return render(request, "ui/rate_limits/_row.html", _row_context(request, destination, editing=True, form=form))


@require_POST
@workspace_view
def update_limit(request: UiRequest, destination_id: int) -> HttpResponse:
    principal = request.principal
    form = forms.LimitForm(request.POST)
    detail: dict[str, Any] = {"field": "concurrency_limit", "input": request.POST.get("concurrency_limit", "")}
    try:
        with audited(principal, "destination.update", target=f"destination:{destination_id}", detail=detail):
            principal.require(Role.OPERATOR, "edit limits")
            destination = _destination(request, destination_id)
            detail.update(name=destination.name, old=destination.concurrency_limit)
            form.is_valid()  # text only: the rules are the service's
            destination_services.update_destination(destination, **form.values())
            detail["new"] = destination.concurrency_limit
    except Invalid as error:
        forms.show_errors(form, error.errors)
        # Shown inline in the row being edited, which keeps the operator's input.
        return render(request, "ui/rate_limits/_row.html", _row_context(
            request, _destination(request, destination_id), editing=True, form=form, error=error.message),
            status=400)
    flash = f"Limit of '{destination.name}' set to {_limit(detail['new'])} (was {_limit(detail['old'])})."
    return changed(render(request, "ui/rate_limits/_row.html", _row_context(request, destination, flash=flash)))


def changed(response: HttpResponse) -> HttpResponse:
    """A change was saved: the page's other parts (the charts) refresh at once (sb-changed)."""
    response["HX-Trigger"] = CHANGED_EVENT
    return response


@require_GET
@workspace_view
def edit_flow(request: UiRequest, destination_id: int) -> HttpResponse:
    request.principal.require(Role.OPERATOR, "edit flow control")
    destination = _destination(request, destination_id)
    form = forms.FlowForm(initial=flow_state.initial(destination))
    return render(request, "ui/rate_limits/_row.html",
                  _row_context(request, destination, editing_flow=True, form=form))


@require_POST
@workspace_view
def update_flow(request: UiRequest, destination_id: int) -> HttpResponse:
    """Save the flow-control settings through the API's service and rules; only the fields
    that change are sent (a change of mode, floor or breaker starts the flow state afresh),
    and the audit row names them with their old and new values, as the API's does."""
    principal = request.principal
    form = forms.FlowForm(request.POST)
    detail: dict[str, Any] = {}
    try:
        with audited(principal, "destination.update", target=f"destination:{destination_id}", detail=detail):
            principal.require(Role.OPERATOR, "edit flow control")
            destination = _destination(request, destination_id)
            form.is_valid()  # text only: the rules are the service's
            values = flow_state.changes(destination, form.values())
            detail.update(name=destination.name, fields=sorted(values),
                          old={f: flow_state.setting(destination, f) for f in values}, new=values)
            destination_services.update_destination(destination, **values)
            detail["new"] = {f: flow_state.setting(destination, f) for f in values}
    except Invalid as error:
        forms.show_errors(form, error.errors)
        return render(request, "ui/rate_limits/_row.html", _row_context(
            request, _destination(request, destination_id), editing_flow=True, form=form,
            error="" if form.errors else error.message), status=400)
    flash = flow_state.saved(destination.name, detail["fields"])
    return changed(render(request, "ui/rate_limits/_row.html", _row_context(request, destination, flow_flash=flash)))


@require_POST
@workspace_view
def pause_destination(request: UiRequest, destination_id: int) -> HttpResponse:
    """Pause (``paused=1``) or resume (``paused=0``) a destination, its limit kept (issue 31)."""
    paused = request.POST.get("paused") == "1"
    principal = request.principal
    detail: dict[str, Any] = {"field": "paused", "new": paused}
    with audited(principal, "destination.update", target=f"destination:{destination_id}", detail=detail):
        principal.require(Role.OPERATOR, "edit limits")
        destination = _destination(request, destination_id)
        detail["name"] = destination.name
        destination_services.update_destination(destination, paused=paused)
    verb = "Paused" if paused else "Resumed"
    flash = f"{verb} '{destination.name}' (limit kept: {_limit(destination.concurrency_limit)})."
    return render(request, "ui/rate_limits/_row.html", _row_context(request, destination, flash=flash))


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else f"{value:,}"


@require_POST
@workspace_view
def create(request: UiRequest) -> HttpResponse:
    principal = request.principal
    form = forms.DestinationForm(request.POST)
    detail: dict[str, Any] = {"name": request.POST.get("name", "")}
    try:
        with audited(principal, "destination.create", target=f"destination:{detail['name']}", detail=detail):
            principal.require(Role.OPERATOR, "create destinations")
            form.is_valid()  # text only: the rules are the service's
            created = destination_services.create_destination(principal.workspace, **form.values())
            detail.update(id=created.pk, base_url=created.base_url, concurrency_limit=created.concurrency_limit)
    except Invalid as error:
        forms.show_errors(form, error.errors)
        return render(request, "ui/rate_limits/_create.html", {"form": form, "error": error.message}, status=400)
    rows = selectors.destinations.every(principal.workspace)
    return changed(render(request, "ui/rate_limits/_created.html", {
        "form": forms.DestinationForm(), "entries": _entries(rows), "can_operate": True,
        "flash": f"Destination '{created.name}' created."}))
