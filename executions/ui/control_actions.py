"""Operators steering running work from the UI (issue 31): pause and resume an execution
tree, edit a running fan-out, pause and resume a destination on the Rate Limits page. Each
POST is CSRF-checked, needs the operator role, is audited, and calls the API's service."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_POST

from executions.fanout import edits
from executions.services import control
from executions.services import lifecycle as services
from executions.ui import forms
from executions.ui.access import UiRequest, workspace_view
from executions.ui.actions import back_to_execution
from executions.ui.responses import done, problem
from workflows.audit import audited
from workflows.models import Role


@require_POST
@workspace_view
def pause_execution(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    principal = request.principal
    with audited(principal, "execution.pause", target=str(execution_id)):
        principal.require(Role.OPERATOR, "pause executions")
        changed = control.pause_execution(services.get_execution(principal.workspace, execution_id),
                                          actor=principal.label)
    return done(request, "Paused: nothing more of this tree is claimed; running steps finish." if changed
                else "Already paused.", back=back_to_execution(execution_id))


@require_POST
@workspace_view
def resume_execution(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    principal = request.principal
    with audited(principal, "execution.resume", target=str(execution_id)):
        principal.require(Role.OPERATOR, "resume executions")
        changed = control.resume_execution(services.get_execution(principal.workspace, execution_id),
                                           actor=principal.label)
    return done(request, "Resumed." if changed else "It was not paused.", back=back_to_execution(execution_id))


@require_POST
@workspace_view
def edit_fanout(request: UiRequest, execution_id: uuid.UUID, spawner: str) -> HttpResponse:
    form = forms.FanOutEditForm(request.POST)
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=form.problems())
    fields = form.fields_to_change()
    if not fields:
        return problem(request, 400, "change maxConcurrency, maxFailureRatio or maxFailures")
    principal = request.principal
    detail: dict[str, Any] = {}
    with audited(principal, "fanout.edit", target=f"{execution_id}/{spawner}", detail=detail):
        principal.require(Role.OPERATOR, "edit fan-outs")
        execution = services.get_execution(principal.workspace, execution_id)
        detail["changes"] = changes = control.edit_fanout(execution, spawner, actor=principal.label, **fields)
    message = f"Fan-out '{spawner}' edited: {edits.describe(changes)}." if changes else "Nothing changed."
    return done(request, message, back=back_to_execution(execution_id))
