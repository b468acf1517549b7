"""The execution view's children table (a live fragment): a page of one fan-out's children,
filtered by status or searched by item key and error text, each row saying which item it is
(its itemKey, or a short preview of its item) and its error without the prefix the page's
errors share (issue 33 §3, issue 31 §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from executions import selectors
from executions.models import Execution
from executions.selectors.fanouts import FanOutView
from executions.ui import access, present, view_state
from executions.ui.access import UiRequest
from executions.ui.responses import Fragment, Poll, render_fragment

CHILD_STATUSES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
SHARED_PREFIX_CHARS = 16  # a shorter common start is not worth taking out


@dataclass
class ChildRow:
    """A children-table row as display strings (50 rows render on every poll: the template
    only prints)."""

    index: int | None
    status: str
    css: str
    attempt: int
    duration: str
    error: str  # without the page's shared prefix
    full_error: str
    url: str
    retry_url: str
    key: str = ""  # its item key (the SPAWNER's itemKey)
    preview: str = ""  # else: the start of its item (its input)


@dataclass(frozen=True)
class Search:
    """The table's search box: item keys (comma- or space-separated) and error text."""

    keys: str = ""
    error: str = ""

    def filter(self, status: str, spawner: str) -> selectors.children.Filter:
        keys = tuple(k for k in self.keys.replace(",", " ").split() if k)
        return selectors.children.Filter(status=status, spawner=spawner, item_keys=keys or None,
                                         error_contains=self.error)


def _url(name: str, *args: Any, **query: Any) -> str:
    base = reverse(f"ui:{name}", args=args)
    query = {k: v for k, v in query.items() if v not in ("", None)}
    return f"{base}?{urlencode(query)}" if query else base


def _id_urls(name: str) -> Any:
    """``reverse`` once, then per id by substitution (one reverse per row is measurable)."""
    marker = "00000000-0000-0000-0000-000000000000"
    pattern = reverse(name, args=[marker])
    return lambda pk: pattern.replace(marker, str(pk))


def shared_prefix(errors: list[str]) -> str:
    """The start that two or more errors share, cut back to a word (``""``: none worth it)."""
    present_errors = [e for e in errors if e]
    if len(present_errors) < 2:
        return ""
    first, last = min(present_errors), max(present_errors)  # the common start of all is theirs
    length = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    common = first[:length]
    cut = max(common.rfind(": ") + 1, common.rfind(" "))  # end at a word: each row keeps its last words
    common = common[: cut + 1] if cut > 0 else ""
    return common if len(common) >= SHARED_PREFIX_CHARS else ""


def _child_rows(rows: list[Any], can_operate: bool) -> tuple[list[ChildRow], str]:
    detail, retry = _id_urls("ui:execution-detail"), _id_urls("ui:execution-retry")
    errors = [present.snippet(c.error_snippet) for c in rows]
    prefix = shared_prefix(errors)
    previews = selectors.identity.item_previews([c.pk for c in rows if not c.item_key])
    built = [ChildRow(index=c.item_index, status=c.status, css=c.status.lower(), attempt=c.attempt,
                      duration=present.elapsed_rounds(c.started_at, c.attempt_started_at, c.finished_at, c.attempt),
                      error=("…" + error[len(prefix):]) if prefix and error.startswith(prefix) else error,
                      full_error=error,
                      url=detail(c.pk), retry_url=retry(c.pk) if can_operate and c.status == "FAILED" else "",
                      key=c.item_key or "", preview=previews.get(c.pk, ""))
             for c, error in zip(rows, errors, strict=True)]
    return built, prefix


def children(request: UiRequest, execution: Execution, view: FanOutView, *, status: str = "", sort: str = "index",
             page: int = 1, search: Search | None = None) -> Fragment:
    search = search or Search()
    spawner = view.spawner_vertex
    found = search.filter(status, spawner)
    capped = False
    if found.narrows:
        rows, has_next = selectors.children.matching_page(execution, found, page=page)
        matching, listed, pages = "", 0, page + 1 if has_next else page
    else:
        count = view.counts().get(status, 0) if status else view.created
        listed = min(count, selectors.children.DURATION_SORT_LIMIT) if sort == "duration" else count
        pages = max(1, -(-listed // selectors.executions.PAGE_SIZE))
        page = min(page, pages)
        rows = selectors.children.of_spawner(execution, spawner, status=status, sort=sort, page=page,
                                             matching=count)
        matching = present.count(count)
        capped = sort == "duration" and count > listed

    def link(**changes: Any) -> str:
        params = {"status": status, "sort": sort, "page": page, "key": search.keys, "error": search.error, **changes}
        return _url("execution-children", execution.pk, spawner, **params)

    def view_url(**changes: Any) -> str:
        """The execution page showing the table so (pushed to the address bar: reload and share
        keep it); a search is not part of the address."""
        params = {"status": status, "sort": sort, "page": page, **changes}
        shown = {k: v for k, v in params.items() if v != view_state.CHILDREN_DEFAULTS[k]}
        return _url("execution-detail", execution.pk, **({"fanout": spawner, **shown} if shown else {}))

    can_operate = access.can_operate(request, execution)
    built, prefix = _child_rows(rows, can_operate)
    context = {
        "e": execution,
        "f": view,
        "rows": built, "shared_prefix": prefix, "search": search, "searching": found.narrows,
        "search_url": _url("execution-children", execution.pk, spawner, status=status),
        "status": status, "sort": sort, "page": page, "pages": pages, "matching": matching,
        "capped": capped, "listed": present.count(listed),
        "status_links": [(s or "all", s, link(status=s, page=1), view_url(status=s, page=1))
                         for s in ("", *CHILD_STATUSES)],
        "sort_links": [(s, link(sort=s, page=1), view_url(sort=s, page=1)) for s in selectors.children.SORTS],
        "pager": {name: (link(page=n), view_url(page=n)) for name, n in
                  (("first", 1), ("previous", page - 1), ("next", page + 1), ("last", pages))},
        "can_operate": can_operate,
        "never_started": present.count(view.never_started),
    }
    live = not execution.is_terminal or view.active
    poll = Poll(f"children-{spawner}", link(), live)
    return render_fragment(request, "ui/execution/_children.html", context, poll)
