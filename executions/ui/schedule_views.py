"""The Schedules page: each cron schedule of the workspace with its cron in words, its next run
(in UTC and in the schedule's own time zone) and its last run. The table refreshes itself every
few seconds, so a fire shows up without a reload. Operators may pause, resume and *run now*
(the schedule services, audited); authors manage schedules in the admin or through the API."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import datetime
from typing import Any

from cron_descriptor import ExpressionDescriptor, Options
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from executions import selectors
from executions.models import Schedule
from executions.services import schedule_runs, schedules
from executions.ui import access, present
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import done
from workflows.audit import audited
from workflows.models import Role

MAX_ROWS = 1000  # schedules are few; a bound all the same
POLL_SECONDS = 10
ALIAS_WORDS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
               "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


@functools.lru_cache(maxsize=1024)
def cron_words(cron: str) -> str:
    """``*/5 * * * *`` → ``Every 5 minutes``; ``0 2 * * 1-5`` → ``At 02:00, Monday through
    Friday`` (cron-descriptor, 24-hour clock); empty if it cannot say."""
    text = cron.strip()
    options = Options()
    options.use_24hour_time_format = True
    try:
        return str(ExpressionDescriptor(ALIAS_WORDS.get(text.lower(), text), options).get_description())
    except Exception:  # any refusal of the describer: the page shows the expression alone
        return ""


def in_zone(moment: datetime | None, zone: str) -> str:
    """``moment`` on the wall clock of ``zone`` (``2026-12-04 03:00 CET``); empty for UTC."""
    if moment is None or zone == "UTC":
        return ""
    try:
        local = moment.astimezone(zoneinfo.ZoneInfo(zone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return ""
    return local.strftime("%Y-%m-%d %H:%M %Z")


def _row(schedule: Schedule) -> dict[str, Any]:
    return {"s": schedule, "words": cron_words(schedule.cron),
            "next_local": in_zone(schedule.next_run_at, schedule.timezone),
            "operable": access.can_start(schedule.workflow.key)}


def _context(request: UiRequest) -> dict[str, object]:
    rows = selectors.schedules.page(request.principal.workspace, after=None, limit=MAX_ROWS)
    return {"rows": [_row(s) for s in rows[:MAX_ROWS]], "more": len(rows) > MAX_ROWS, "poll_seconds": POLL_SECONDS,
            "can_operate": access.can_operate(request)}


@require_GET
@workspace_view
def schedule_list(request: UiRequest) -> HttpResponse:
    return render(request, "ui/schedules.html", _context(request))


@require_GET
@workspace_view
def schedule_rows(request: UiRequest) -> HttpResponse:
    """The table alone (the page's poll)."""
    return render(request, "ui/_schedule_rows.html", _context(request))


# --- actions (POST, operator role, audited) ------------------------------------------------------

def _back() -> str:
    return reverse("ui:schedule-list")


@require_POST
@workspace_view
def pause(request: UiRequest, name: str) -> HttpResponse:
    principal = request.principal
    with audited(principal, "schedule.pause", target=name):
        principal.require(Role.OPERATOR, "pause schedules")
        schedules.update_schedule(selectors.schedules.named(principal.workspace, name), enabled=False)
    return done(request, f"Paused schedule '{name}': it starts nothing until resumed.", back=_back())


@require_POST
@workspace_view
def resume(request: UiRequest, name: str) -> HttpResponse:
    principal = request.principal
    with audited(principal, "schedule.resume", target=name):
        principal.require(Role.OPERATOR, "resume schedules")
        resumed = schedules.update_schedule(selectors.schedules.named(principal.workspace, name), enabled=True)
    when = resumed.next_run_at.strftime("%Y-%m-%d %H:%M UTC") if resumed.next_run_at else "—"
    return done(request, f"Resumed schedule '{name}': next run {when} (fire times missed while paused are "
                         "not caught up).", back=_back())


@require_POST
@workspace_view
def run_now(request: UiRequest, name: str) -> HttpResponse:
    principal = request.principal
    with audited(principal, "schedule.run-now", target=name):
        principal.require(Role.OPERATOR, "run schedules")
        execution = schedule_runs.run_now(selectors.schedules.named(principal.workspace, name), by=principal.label)
    return done(request, f"Started {execution.workflow.key} now for schedule '{name}': execution "
                         f"{present.short_id(execution.pk)}.", back=_back())
