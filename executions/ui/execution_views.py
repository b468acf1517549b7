"""Read views of executions: the list, the execution page and its live fragments."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from executions import selectors
from executions.models import Execution, Step
from executions.selectors.fanouts import FanOutView
from executions.ui import children_table, forms, listing, parts
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import fragment_response, problem, unchanged
from workflows import selectors as workflow_selectors


@require_GET
@workspace_view
def execution_list(request: UiRequest) -> HttpResponse:
    workspace = request.principal.workspace
    form = forms.ExecutionFilters(request.GET, workflow_keys=workflow_selectors.keys(workspace))
    context: dict[str, object] = {"form": form}
    if not form.is_valid():
        context["filter_error"] = forms.describe(form)
        return render(request, "ui/execution_list.html", context, status=400)
    page = selectors.executions.listing(workspace, form.filters(), form.search_id())
    context["table"] = listing.table(request, page, form.filters(), form.search_id(), listing.query_of(request))
    return render(request, "ui/execution_list.html", context)


@require_GET
@workspace_view
def execution_rows(request: UiRequest) -> HttpResponse:
    """The list's rows alone (their poll)."""
    workspace = request.principal.workspace
    form = forms.ExecutionFilters(request.GET, workflow_keys=workflow_selectors.keys(workspace))
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=forms.field_errors(form))
    page = selectors.executions.listing(workspace, form.filters(), form.search_id())
    return fragment_response(request, listing.table(request, page, form.filters(), form.search_id(),
                                                    listing.query_of(request)))


@require_GET
@workspace_view
def execution_page(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = _execution(request, execution_id)
    context = {
        "e": execution,
        "header": parts.header(request, execution),
        "body": parts.body(request, execution),
        "steps": parts.steps(request, execution),
    }
    return render(request, "ui/execution.html", context)


def _execution(request: UiRequest, execution_id: uuid.UUID) -> Execution:
    return selectors.executions.get(request.principal.workspace, execution_id)


def _merges(execution: Execution, views: list[FanOutView]) -> dict[str, Step]:
    return selectors.steps.named(execution, [v.merge_vertex for v in views if v.merge_vertex])


# --- live fragments -------------------------------------------------------------------------------

@require_GET
@workspace_view
def header_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    return fragment_response(request, parts.header(request, _execution(request, execution_id)))


@require_GET
@workspace_view
def body_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = _execution(request, execution_id)
    version = parts.body_version(execution)
    if not execution.is_terminal and unchanged(request, "execution-body", version):
        return HttpResponse(status=204)  # nothing appeared or went: not even rendered
    return fragment_response(request, parts.body(request, execution, version))


@require_GET
@workspace_view
def steps_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    return fragment_response(request, parts.steps(request, _execution(request, execution_id)))


@require_GET
@workspace_view
def fanout_fragment(request: UiRequest, execution_id: uuid.UUID, spawner: str) -> HttpResponse:
    execution = _execution(request, execution_id)
    view = selectors.fanouts.one(execution, spawner, waiting=True)
    merge = _merges(execution, [view]).get(view.merge_vertex or "")
    return fragment_response(request, parts.fanout_panel(request, execution, view, merge))


@require_GET
@workspace_view
def children_fragment(request: UiRequest, execution_id: uuid.UUID, spawner: str) -> HttpResponse:
    execution = _execution(request, execution_id)
    view = selectors.fanouts.one(execution, spawner)
    form = forms.ChildrenFilters(request.GET)
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=forms.field_errors(form))
    status, sort, page = form.values()
    return fragment_response(request, parts.children(request, execution, view, status=status, sort=sort, page=page,
                                                     search=children_table.Search(*form.search_terms())))


@require_GET
@workspace_view
def long_tail_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = _execution(request, execution_id)
    return fragment_response(request, parts.long_tail(request, execution, selectors.fanouts.of(execution)))
