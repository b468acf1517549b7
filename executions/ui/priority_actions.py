"""The operator's control of a running tree's priority (issue 30): the execution view's header
posts here; the same service as ``PATCH /api/v1/executions/{id}`` (services.set_priority),
CSRF-checked, operator role, audited as ``execution.priority`` — accepted or refused."""

from __future__ import annotations

import uuid

from django import forms
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from executions.services import lifecycle as services
from executions.ui.access import UiRequest, workspace_view
from executions.ui.forms import describe, field_errors
from executions.ui.responses import done, problem
from workflows.audit import audited
from workflows.models import Role


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=1, max_value=5,
                                  error_messages={"required": "Choose a priority from 1 (first) to 5."})


@require_POST
@workspace_view
def change_priority(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    """Give the execution's whole tree (root and every descendant) the chosen priority."""
    form = PriorityForm(request.POST)
    if not form.is_valid():
        return problem(request, 400, describe(form), errors=field_errors(form))
    priority = form.cleaned_data["priority"]
    principal = request.principal
    detail: dict[str, object] = {"priority": priority}
    with audited(principal, "execution.priority", target=str(execution_id), detail=detail):
        principal.require(Role.OPERATOR, "change priorities")
        execution = services.get_execution(principal.workspace, execution_id)
        detail["was"] = old = services.set_priority(execution, priority)
    tree = "the tree" if execution.root_id not in (None, execution.pk) else "this execution's tree"
    return done(request, f"Priority of {tree} set to {priority} (was {old}).",
                back=reverse("ui:execution-detail", args=[execution_id]))
