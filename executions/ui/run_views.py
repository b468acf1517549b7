"""The execution view's pictures as live fragments: the run panel (graph and timeline) and a
fan-out's throughput chart (run_parts.py)."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from executions import selectors
from executions.ui import run_parts
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import fragment_response


@require_GET
@workspace_view
def run_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = selectors.executions.get(request.principal.workspace, execution_id)
    return fragment_response(request, run_parts.run_panel(request, execution))


@require_GET
@workspace_view
def throughput_fragment(request: UiRequest, execution_id: uuid.UUID, spawner: str) -> HttpResponse:
    execution = selectors.executions.get(request.principal.workspace, execution_id)
    view = selectors.fanouts.one(execution, spawner)
    return fragment_response(request, run_parts.throughput_panel(request, execution, view))
