"""The Workflows pages: what is published; per workflow, a start form and its versions; per
version, its graph (server-drawn SVG) and the diff to the previous version."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from executions.services import lifecycle as services
from executions.ui import access, forms, graph
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import problem
from workflows import dsl, selectors
from workflows.audit import audited
from workflows.models import Role


@require_GET
@workspace_view
def workflow_list(request: UiRequest) -> HttpResponse:
    rows = selectors.definitions(request.principal.workspace)
    return render(request, "ui/workflows.html", {"rows": rows})


@require_GET
@workspace_view
def workflow_page(request: UiRequest, key: str) -> HttpResponse:
    definition = selectors.definition(request.principal.workspace, key)
    current = definition.current_version
    context = {
        "d": definition,
        "versions": definition.recent_versions,  # type: ignore[attr-defined]  # set by the selector
        "version_count": definition.version_count,  # type: ignore[attr-defined]  # set by the selector
        "graph": _graph(current.dsl) if current else "",
        "can_start": request.principal.can(Role.OPERATOR) and access.can_start(key),
        "reserved": not access.can_start(key),
        "uploads_url": reverse("api:uploads"),
    }
    return render(request, "ui/workflow.html", context)


@require_GET
@workspace_view
def version_page(request: UiRequest, key: str, digest: str) -> HttpResponse:
    version = selectors.version_of(request.principal.workspace, key, digest)
    previous = selectors.previous_version(version)
    context = {"v": version, "key": key, "graph": _graph(version.dsl), "previous": previous,
               "diff": selectors.version_diff(version).splitlines()}
    return render(request, "ui/version.html", context)


def _graph(document: object) -> str:
    return mark_safe(graph.svg(dsl.parse(document)))  # noqa: S308 - built by graph.svg, every text escaped


@require_POST
@workspace_view
def start(request: UiRequest, key: str) -> HttpResponse:
    """Start ``key`` with the JSON input typed (an uploaded file already named in it as
    ``{"$upload": id}``); the new execution opens."""
    form = forms.StartForm(request.POST)
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=form.problems())
    principal = request.principal
    with audited(principal, "execution.start", target=key, detail={"via": "ui"}):
        principal.require(Role.OPERATOR, "start executions")
        started = services.start_execution(principal.workspace, workflow=key, input=form.cleaned_data["input"],
                                           idempotency_key=form.cleaned_data["idempotency_key"] or None,
                                           created_by=principal.label, tags=form.cleaned_data["tags"],
                                           priority=form.cleaned_data["priority"])
    url = reverse("ui:execution-detail", args=[started.execution.pk])
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponse(status=303, headers={"Location": url})
