"""Operator actions on executions. Each POST is CSRF-checked (Django's middleware), needs
the operator role, is audited (accepted or refused, with the reason) and calls the same
service as the API: the UI has no powers of its own."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from executions.services import lifecycle as services
from executions.services import waits
from executions.ui import forms, present
from executions.ui.access import UiRequest, workspace_view
from executions.ui.responses import done, problem
from workflows.audit import audited
from workflows.models import Role


def back_to_execution(execution_id: uuid.UUID) -> str:
    """Where an action on an execution sends the browser back to: its page."""
    return reverse("ui:execution-detail", args=[execution_id])


@require_POST
@workspace_view
def retry_execution(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    """Retry a failed execution — usually one failed child: same id and key, a new attempt."""
    principal = request.principal
    with audited(principal, "execution.retry", target=str(execution_id)):
        principal.require(Role.OPERATOR, "retry executions")
        execution = services.get_execution(principal.workspace, execution_id)
        step = services.retry_execution(execution, actor=principal.label)
    what = f"child #{execution.item_index}" if execution.item_index is not None else "execution"
    return done(request, f"Retried {what} {present.short_id(execution.pk)} (step '{step.vertex}', "
                         f"attempt {step.attempt}).", back=back_to_execution(execution_id))


@require_POST
@workspace_view
def retry_edited(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    """Retry a failed execution with the input the operator edited (validated first; the
    edit is noted in the execution's events and in the audit log)."""
    form = forms.RetryInputForm(request.POST)
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=form.problems())
    principal = request.principal
    with audited(principal, "execution.retry", target=str(execution_id), detail={"input_edited": True}):
        principal.require(Role.OPERATOR, "retry executions")
        execution = services.get_execution(principal.workspace, execution_id)
        step = services.retry_execution(execution, input=form.cleaned_data["input"], actor=principal.label)
    what = f"child #{execution.item_index}" if execution.item_index is not None else "execution"
    return done(request, f"Retried {what} {present.short_id(execution.pk)} with the edited input "
                         f"(step '{step.vertex}', attempt {step.attempt}).", back=back_to_execution(execution_id))


@require_POST
@workspace_view
def retry_step(request: UiRequest, execution_id: uuid.UUID, vertex: str) -> HttpResponse:
    """Retry one failed step, e.g. a spawner: existing children are re-linked, not re-run."""
    principal = request.principal
    with audited(principal, "step.retry", target=f"{execution_id}/{vertex}"):
        principal.require(Role.OPERATOR, "retry steps")
        execution = services.get_execution(principal.workspace, execution_id)
        step = services.retry_step(execution, vertex, actor=principal.label)
    return done(request, f"Retried step '{vertex}' (attempt {step.attempt}).", back=back_to_execution(execution_id))


@require_POST
@workspace_view
def retry_failed_children(request: UiRequest, execution_id: uuid.UUID, spawner: str) -> HttpResponse:
    principal = request.principal
    # audited() writes its row after the body, so the count recorded is the real one.
    detail: dict[str, object] = {"spawner": spawner}
    with audited(principal, "execution.retry-failed-children", target=str(execution_id), detail=detail):
        principal.require(Role.OPERATOR, "retry children")
        execution = services.get_execution(principal.workspace, execution_id)
        counts = services.retry_failed_children(execution, spawner=spawner, actor=principal.label)
        detail["retried"] = counts.retried
        if counts.cancelled_by_fail_fast or counts.never_started:
            detail["cancelled_by_fail_fast"] = counts.cancelled_by_fail_fast
            detail["never_started"] = counts.never_started
    return done(request, present.retried(counts, spawner), back=back_to_execution(execution_id))


@require_POST
@workspace_view
def cancel_execution(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    principal = request.principal
    detail: dict[str, object] = {}
    with audited(principal, "execution.cancel", target=str(execution_id), detail=detail):
        principal.require(Role.OPERATOR, "cancel executions")
        execution = services.get_execution(principal.workspace, execution_id)
        detail["cancelled"] = cancelled = services.cancel_execution(execution, actor=principal.label)
    return done(request, f"Cancelled {cancelled:,} execution{'s' if cancelled != 1 else ''}.",
                back=back_to_execution(execution_id))


@require_POST
@workspace_view
def cancel_open_children(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    principal = request.principal
    detail: dict[str, object] = {}
    with audited(principal, "execution.cancel-open-children", target=str(execution_id), detail=detail):
        principal.require(Role.OPERATOR, "cancel executions")
        execution = services.get_execution(principal.workspace, execution_id)
        detail["cancelled"] = cancelled = services.cancel_open_children(execution, actor=principal.label)
    message = (f"Cancelled {cancelled:,} unfinished child execution{'s' if cancelled != 1 else ''}."
               if cancelled else "No unfinished children to cancel.")
    return done(request, message, back=back_to_execution(execution_id))


@require_POST
@workspace_view
def complete_step(request: UiRequest, execution_id: uuid.UUID, vertex: str) -> HttpResponse:
    """Complete (or fail) a step waiting for a callback — an approval (S27). A FAILED step's
    reason comes from the form or the button's prompt (``HX-Prompt``)."""
    data = request.POST.copy()
    if not data.get("error") and request.headers.get("HX-Prompt"):
        data["error"] = request.headers["HX-Prompt"]
    form = forms.CompleteStepForm(data)
    if not form.is_valid():
        return problem(request, 400, forms.describe(form), errors=form.problems())
    status = form.cleaned_data["status"]
    principal = request.principal
    with audited(principal, "step.complete", target=f"{execution_id}/{vertex}", detail={"status": status}):
        principal.require(Role.OPERATOR, "complete steps")
        execution = services.get_execution(principal.workspace, execution_id)
        waits.complete_step(execution, vertex, waits.completion(status, form.cleaned_data["input"],
                                                                form.cleaned_data["error"]), actor=principal.label)
    verb = "Completed" if status == "SUCCEEDED" else "Failed"
    return done(request, f"{verb} step '{vertex}'.", back=back_to_execution(execution_id))
