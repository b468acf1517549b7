"""View state that lives in the address: what the execution view's children tables show
(filter, sort, page), so a reload or a shared link shows the same view. htmx requests that
change it push the new address (``hx-push-url``); the execution list's filters and page are a
plain GET form and links, in the address already."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.http import QueryDict

from executions.ui import forms
from executions.ui.access import UiRequest

CHILDREN_DEFAULTS: dict[str, Any] = {"status": "", "sort": "index", "page": 1}


def children(request: UiRequest, spawner: str) -> dict[str, Any]:
    """The children table's filter, sort and page for ``spawner`` as the address says
    (``?fanout=fan&status=FAILED&sort=duration&page=2``; without ``fanout``, for every table):
    the page's own query, or for a poll of the body the page's address (HX-Current-URL).
    An address that does not parse shows the defaults."""
    query: Any = request.GET
    if request.htmx and request.htmx.current_url:
        query = QueryDict(urlsplit(request.htmx.current_url).query)
    if query.get("fanout", spawner) != spawner:
        return dict(CHILDREN_DEFAULTS)
    form = forms.ChildrenFilters(query)
    if not form.is_valid():
        return dict(CHILDREN_DEFAULTS)
    status, sort, page = form.values()
    return {"status": status, "sort": sort, "page": page}
