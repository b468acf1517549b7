"""The demo ledger (``POST /demo/ledger/entries``, the destination the ledger migration
calls) and its operator switch on the Rate Limits page."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from demo import ledger
from demo.models import DemoLedgerEntry
from demo.workflows import LEDGER_DESTINATION
from executions.models import Destination
from executions.ui import access
from executions.ui.access import UiRequest, workspace_view
from executions.ui.forms import describe, field_errors
from executions.ui.responses import done
from workflows.audit import audited
from workflows.errors import Invalid
from workflows.models import Role

SWITCH_TEMPLATE = "demo/_ledger_switch.html"


@csrf_exempt
@require_POST
def ledger_entries(request: HttpRequest) -> HttpResponse:
    """The demo ledger: ``POST /demo/ledger/entries`` with an entry and an Idempotency-Key."""
    try:
        entry = json.loads(request.body or b"null")
    except json.JSONDecodeError:
        return JsonResponse({"error": "body is not JSON"}, status=400)
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return JsonResponse({"error": "an entry is an object with a string 'id'"}, status=400)
    if ledger.refuses(entry["id"]) and not ledger.healthy():
        return JsonResponse({"error": f"ledger unavailable for {entry['id']} (demo outage)"}, status=503)
    key = request.headers.get("Idempotency-Key") or f"entry:{entry['id']}"
    _, created = DemoLedgerEntry.objects.get_or_create(idempotency_key=key, defaults={"entry": entry})
    return JsonResponse({"id": entry["id"], "written": created}, status=201 if created else 200)


def ledger_switch_panel(request: UiRequest, destinations: Sequence[Destination]) -> str | None:
    """The switch shown on the Rate Limits page of a workspace that has the demo ledger."""
    if not any(d.name == LEDGER_DESTINATION for d in destinations):
        return None
    return render_to_string(SWITCH_TEMPLATE, {"healthy": ledger.healthy(),
                                              "can_operate": access.can_operate(request)}, request=request)


class SwitchForm(forms.Form):
    on = forms.TypedChoiceField(choices=[("1", "on"), ("0", "off")], coerce=lambda v: v == "1",
                                error_messages={"invalid_choice": "'%(value)s' is not a switch position; "
                                                                  "use one of: 1, 0."})


@require_POST
@workspace_view
def ledger_health(request: UiRequest) -> HttpResponse:
    """Start or end the demo ledger's outage (operators; audited as ``demo.switch``)."""
    principal = request.principal
    form = SwitchForm(request.POST)
    with audited(principal, "demo.switch", target=ledger.LEDGER_HEALTHY, detail={"on": request.POST.get("on", "")}):
        principal.require(Role.OPERATOR, "flip demo switches")
        if not form.is_valid():
            raise Invalid(describe(form), errors=field_errors(form))
        ledger.set_healthy(form.cleaned_data["on"])
    healthy = form.cleaned_data["on"]
    message = "Demo ledger is healthy: every entry is accepted." if healthy else \
        "Demo ledger is in an outage: it refuses ~3% of entries."
    if not request.htmx:
        return done(request, message, back=reverse("ui:rate-limits"))
    return render(request, SWITCH_TEMPLATE, {"healthy": healthy, "can_operate": True, "flash": message})
