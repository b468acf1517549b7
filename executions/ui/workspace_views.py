"""Switching the browser session between the workspaces a user belongs to."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from executions.ui import responses
from executions.ui.access import UiRequest, workspace_view
from workflows.access import SESSION_WORKSPACE


@require_POST
@workspace_view
def switch_workspace(request: UiRequest) -> HttpResponse:
    slug = request.POST.get("workspace", "")
    if slug not in {workspace.slug for workspace in request.workspaces}:
        return responses.problem(request, 404, f"You are not a member of a workspace called '{slug[:100]}'.")
    request.session[SESSION_WORKSPACE] = slug
    return redirect("ui:execution-list")
