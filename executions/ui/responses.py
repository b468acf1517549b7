"""How UI views answer: errors as 4xx pages or flash fragments (never a 500), action results
as a flash plus an ``sb-changed`` event, and live fragments that poll while there is
something to watch.

Live fragments. Each fragment is an element that re-fetches itself (``hx-get``, swapped
``outerHTML``) every few seconds while ``live`` and whenever an action announces
``sb-changed``. Its HTML carries a fingerprint of itself; a poll whose fingerprint still
matches gets ``204 No Content`` (htmx swaps nothing), so only fragments that changed are
re-rendered in the browser. A fragment that is no longer live answers ``286``, which stops
htmx polling, and its new element no longer asks to poll; an action that re-opens the
execution fires ``sb-changed`` and the fragments come back to life.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django_htmx.http import HTMX_STOP_POLLING

from workflows.errors import PermissionDenied, ServiceError

CHANGED_EVENT = "sb-changed"
VERSION_MARK = "__SB_VERSION__"
POLL_SECONDS = 2


def problem(request: HttpRequest, status: int, message: str, *, errors: list[dict[str, str]] | None = None
            ) -> HttpResponse:
    """A 4xx answer with a precise message: a page, or for htmx a flash retargeted to #flash."""
    context = {"status": status, "message": message, "errors": errors or []}
    if getattr(request, "htmx", False):
        response = render(request, "ui/_flash.html", {**context, "level": "error"}, status=status)
        response["HX-Retarget"] = "#flash"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(request, "ui/error.html", context, status=status)


def guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Map refusals (service errors, missing permission) to 4xx answers."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except ServiceError as error:
            return problem(request, error.status, error.message, errors=error.errors)
        except PermissionDenied as error:
            return problem(request, 403, str(error))

    return wrapper


def done(request: HttpRequest, message: str, *, back: str) -> HttpResponse:
    """An action succeeded: for htmx a flash and the ``sb-changed`` event (live fragments
    refresh themselves), otherwise a redirect back with a message."""
    if getattr(request, "htmx", False):
        response = render(request, "ui/_flash.html", {"level": "ok", "message": message, "oob": True})
        response["HX-Trigger"] = CHANGED_EVENT
        return response
    messages.success(request, message)
    return redirect(back)


# --- live fragments -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Poll:
    """What a live fragment's root element needs: its id, its URL and whether to poll."""

    id: str
    url: str
    live: bool
    every: int = POLL_SECONDS


@dataclass(frozen=True)
class Fragment:
    id: str
    html: str
    version: str
    live: bool

    def __str__(self) -> str:
        return self.html


def fingerprint(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def render_fragment(request: HttpRequest, template: str, context: dict[str, Any], poll: Poll,
                    version: str | None = None) -> Fragment:
    """Render a live fragment; its fingerprint is that of its HTML, or ``version`` — for a
    fragment that holds other live fragments and changes only when its structure does."""
    html = render_to_string(template, {**context, "poll": poll, "version_mark": VERSION_MARK}, request=request)
    version = version or fingerprint(html)
    return Fragment(poll.id, html.replace(VERSION_MARK, version), version, poll.live)


def unchanged(request: HttpRequest, fragment_id: str, version: str) -> bool:
    """The fragment's own poll, and its fingerprint still matches: answer 204 unrendered."""
    return request.headers.get("HX-Trigger") == fragment_id and request.GET.get("v") == version


def fragment_response(request: HttpRequest, fragment: Fragment) -> HttpResponse:
    # Only the fragment's own poll or refresh carries its id as HX-Trigger; a filter link
    # inside it inherits the fingerprint but must always get fresh content.
    own_request = request.headers.get("HX-Trigger") == fragment.id
    if fragment.live and own_request and request.GET.get("v") == fragment.version:
        return HttpResponse(status=204)
    return HttpResponse(fragment.html, status=200 if fragment.live else HTMX_STOP_POLLING)
