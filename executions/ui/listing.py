"""The execution list's rows: each execution with its relative creation time and, for a
parent, its fan-out health (a mini bar and counts, from the fan-out counters: one query for
the page, never a scan of the children). The rows are a live fragment that refreshes while
one of them is unfinished (responses.py); the page's total is counted up to 10,000."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils import timezone

from executions import selectors
from executions.models import Execution
from executions.selectors.executions import COUNT_CAP, ListFilters, Page
from executions.selectors.fanout_health import Health
from executions.ui import present
from executions.ui.access import UiRequest
from executions.ui.responses import Fragment, Poll, render_fragment

POLL_SECONDS = 5
ACTIVE = ("PENDING", "RUNNING")


@dataclass(frozen=True)
class Bar:
    """A parent's children as a mini bar (segments of css, label, count, width %) and words."""

    segments: list[tuple[str, str, str, float]]
    words: list[tuple[str, str]]  # (css, text), e.g. ("failed", "41 failed (tolerated)")
    total: str

    @property
    def summary(self) -> str:
        return f"{self.total} children: " + ", ".join(text for _, text in self.words)


def bar(health: Health) -> Bar:
    parts = [("succeeded", "succeeded", health.succeeded), ("failed", "failed", health.failed),
             ("cancelled", "cancelled", health.cancelled), ("running", "unfinished", health.unfinished),
             ("never_started", "not started yet", health.never_started)]
    whole = health.total or 1
    segments = [(css, label, present.count(n), round(100.0 * n / whole, 2)) for css, label, n in parts if n]
    words = [(css, f"{present.count(n)} {label}{_tolerance(health, css)}") for css, label, n in parts if n]
    return Bar(segments, words, present.count(health.total))


def _tolerance(health: Health, css: str) -> str:
    tolerated = {"failed": health.failed_tolerated, "cancelled": health.cancelled_tolerated}.get(css)
    if not tolerated:
        return ""
    return " (over the tolerance)" if health.exceeded else " (tolerated)"


def rows(page: Page) -> list[dict[str, Any]]:
    health = selectors.fanout_health.of(e.pk for e in page.rows)
    now = timezone.now()
    return [_row(e, health.get(e.pk), now) for e in page.rows]


def _row(execution: Execution, health: Health | None, now: Any) -> dict[str, Any]:
    return {"e": execution, "bar": bar(health) if health else None,
            "ago": present.ago(execution.created_at, now),
            "live": execution.status in ACTIVE or bool(health and health.unfinished),
            "duration": present.elapsed_rounds(execution.started_at, execution.attempt_started_at,
                                               execution.finished_at, execution.attempt)}


def total_text(n: int) -> str:
    shown = f"{COUNT_CAP:,}+" if n > COUNT_CAP else f"{n:,}"
    return f"{shown} execution{'' if n == 1 else 's'}"


def table(request: UiRequest, page: Page, filters: ListFilters, search_id: Any, query: str) -> Fragment:
    """The rows as a live fragment: it polls (every 5 s, 204 while unchanged) while one of
    them is unfinished, with the filters and page of the URL it was rendered for."""
    found = rows(page)
    total = selectors.executions.count(request.principal.workspace, filters, search_id)
    url = reverse("ui:execution-rows") + (f"?{query}" if query else "")
    poll = Poll("execution-rows", url, live=any(r["live"] for r in found), every=POLL_SECONDS)
    context = {"rows": found, "page": page, "total": total_text(total), "total_n": total,
               "query": _without_page(request)}
    return render_fragment(request, "ui/_execution_rows.html", context, poll)


def _without_page(request: UiRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("v", None)
    return query.urlencode()


def query_of(request: UiRequest) -> str:
    """The list's own query (filters and page), without a poll's fingerprint."""
    query = request.GET.copy()
    query.pop("v", None)
    return query.urlencode()
