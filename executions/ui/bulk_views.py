"""The execution view's bulk panel (issue 31 §5, issue 33 §3): the error groups of the failed
children, each with "Retry this group"; a filter form that retries or cancels the matching
children; and the progress of the latest bulk operations (a live fragment that polls while
one runs). The POST calls the same service as the API's ``…/children/retry`` and ``/cancel``
(services/bulk.py) and is audited the same way."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django import forms
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from executions import selectors
from executions.models import Execution, ExecutionStatus
from executions.services import bulk as services
from executions.services import lifecycle
from executions.ui import access
from executions.ui.access import UiRequest, workspace_view
from executions.ui.forms import describe, field_errors
from executions.ui.responses import Fragment, Poll, done, fragment_response, problem, render_fragment
from workflows.audit import audited
from workflows.models import Role

INDEX_RANGE = re.compile(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9})\s*)?")
AUDIT = {"retry": ("execution.children-retry", "retry executions"),
         "cancel": ("execution.children-cancel", "cancel executions")}


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("retry", "retry"), ("cancel", "cancel")])
    status = forms.ChoiceField(choices=[("", "any status"), *ExecutionStatus.choices], required=False)
    error_contains = forms.CharField(max_length=2000, required=False, strip=False)
    indexes = forms.CharField(max_length=20_000, required=False,
                              help_text="Item indexes and ranges: 3, 7, 10-20")
    error_signature = forms.CharField(max_length=2000, required=False, strip=False, widget=forms.HiddenInput)

    def clean_indexes(self) -> list[int] | None:
        text = self.cleaned_data["indexes"].strip()
        if not text:
            return None
        found: list[int] = []
        for part in text.split(","):
            match = INDEX_RANGE.fullmatch(part)
            if not match:
                raise forms.ValidationError(f"'{part.strip()}' is not an index or a range like 10-20")
            low, high = int(match[1]), int(match[2] or match[1])
            if high < low or len(found) + high - low + 1 > services.MAX_INDEXES:
                raise forms.ValidationError(f"'{part.strip()}': at most {services.MAX_INDEXES:,} indexes, low to high")
            found.extend(range(low, high + 1))
        return found

    def terms(self) -> dict[str, Any]:
        data = self.cleaned_data
        terms = {"status": [data["status"]] if data["status"] else None, "indexes": data["indexes"],
                 "error_contains": data["error_contains"] or None, "error_signature": data["error_signature"] or None}
        return {name: value for name, value in terms.items() if value is not None}


def panel(request: UiRequest, execution: Execution) -> Fragment:
    operations = selectors.bulk.latest(execution.pk)
    running = any(op["state"] == "running" for op in operations)
    context = {
        "e": execution,
        "can_operate": access.can_operate(request, execution),
        "groups": selectors.bulk.error_groups(execution.pk),
        "operations": [{**op, "percent": _percent(op)} for op in operations],
        "statuses": ExecutionStatus.choices,
        "start_url": reverse("ui:bulk-start", args=[execution.pk]),
    }
    poll = Poll("execution-bulk", reverse("ui:execution-bulk", args=[execution.pk]),
                live=running or not execution.is_terminal)
    return render_fragment(request, "ui/execution/_bulk.html", context, poll)


def _percent(operation: dict[str, Any]) -> int:
    matched = operation["matched"]
    return 100 if not matched else (100 * (operation["done"] + operation["skipped"])) // matched


@require_GET
@workspace_view
def bulk_fragment(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = selectors.executions.get(request.principal.workspace, execution_id)
    return fragment_response(request, panel(request, execution))


@require_POST
@workspace_view
def bulk_start(request: UiRequest, execution_id: uuid.UUID) -> HttpResponse:
    form = BulkForm(request.POST)
    if not form.is_valid():
        return problem(request, 400, describe(form), errors=field_errors(form))
    action, terms = form.cleaned_data["action"], form.terms()
    audit, what = AUDIT[action]
    principal = request.principal
    detail: dict[str, object] = {"filter": terms}
    with audited(principal, audit, target=str(execution_id), detail=detail):
        principal.require(Role.OPERATOR, what)
        execution = lifecycle.get_execution(principal.workspace, execution_id)
        started = services.start(execution, action, terms, actor=principal.label)
        detail.update(operation=str(started.operation), matched=started.matched)
    noun = "child" if started.matched == 1 else "children"
    return done(request, f"Bulk {action} started: {started.matched:,} matching {noun}; its progress is shown "
                         "under Errors and bulk actions.", back=reverse("ui:execution-detail", args=[execution_id]))
