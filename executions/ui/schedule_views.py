"""The Schedules page: each cron schedule of the workspace with its next and last runs
(read-only; authors manage schedules in the admin or through the API). The table refreshes
itself every few seconds, so a fire shows up without a reload."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from executions import selectors
from executions.ui.access import UiRequest, workspace_view

MAX_ROWS = 1000  # schedules are few; a bound all the same
POLL_SECONDS = 10


def _context(request: UiRequest) -> dict[str, object]:
    rows = selectors.schedules.page(request.principal.workspace, after=None, limit=MAX_ROWS)
    return {"rows": rows[:MAX_ROWS], "more": len(rows) > MAX_ROWS, "poll_seconds": POLL_SECONDS}


@require_GET
@workspace_view
def schedule_list(request: UiRequest) -> HttpResponse:
    return render(request, "ui/schedules.html", _context(request))


@require_GET
@workspace_view
def schedule_rows(request: UiRequest) -> HttpResponse:
    """The table alone (the page's poll)."""
    return render(request, "ui/_schedule_rows.html", _context(request))
