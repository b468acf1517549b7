"""The Workflows page: what is published, with links into the admin where authors edit."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from executions.ui.access import UiRequest, workspace_view
from workflows import selectors


@require_GET
@workspace_view
def workflow_list(request: UiRequest) -> HttpResponse:
    rows = selectors.definitions(request.principal.workspace)
    return render(request, "ui/workflows.html", {"rows": rows})
