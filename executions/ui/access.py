"""Who is acting in the UI: a logged-in user resolved to a workspace Principal once per
request. Every view goes through ``workspace_view``; objects are then looked up within
``request.principal.workspace`` only, so another workspace's id is simply not found."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import resolve_url
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from executions.models import Execution
from executions.ui import responses
from workflows import sudo
from workflows.access import Principal, principal_for_session, user_workspaces
from workflows.models import Role, Workspace

View = Callable[..., HttpResponse]


class UiRequest(HttpRequest):
    """A request as UI views see it: django-htmx's details and who is acting."""

    htmx: HtmxDetails
    principal: Principal
    workspaces: list[Workspace]  # those the user may switch to


def workspace_view(view: View) -> View:
    """Require a login and a workspace membership; set ``request.principal``."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return _to_login(request)
        principal = principal_for_session(request.user, request.session)
        if principal is None:
            return responses.problem(request, 403, "Your account is not a member of any workspace. "
                                                   "Ask an admin to add you to one.")
        ui_request = cast(UiRequest, request)
        ui_request.principal = principal
        ui_request.workspaces = user_workspaces(request.user)
        return responses.guarded(view)(ui_request, *args, **kwargs)

    return wrapper


def _to_login(request: HttpRequest) -> HttpResponse:
    # An htmx request (a poll after the session expired) must not swap the login page into
    # a fragment: the browser is sent to the login page instead, coming back afterwards.
    htmx = cast(UiRequest, request).htmx
    if htmx:
        query = QueryDict(mutable=True)
        query["next"] = htmx.current_url_abs_path or "/"
        return HttpResponseClientRedirect(f"{resolve_url(settings.LOGIN_URL)}?{query.urlencode(safe='/')}")
    return redirect_to_login(request.get_full_path())


def can_operate(request: UiRequest, execution: Execution | None = None) -> bool:
    """Whether to show action buttons (the server checks again on every POST). Executions of
    a reserved system workflow take actions only from a signed system actor (S15), which a
    browser session never is."""
    if execution is not None and sudo.is_reserved(execution.workflow.key):
        return False
    return request.principal.can(Role.OPERATOR)


def can_start(key: str) -> bool:
    """Whether the UI offers to start workflow ``key``: a reserved one starts only through a
    signed system actor (S15), which a browser session never is."""
    return not sudo.is_reserved(key)
