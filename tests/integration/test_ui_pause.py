"""The UI's pause, resume and fan-out edit actions (issue 31): CSRF-checked POSTs that need
the operator role, are audited, and call the API's services; the Rate Limits page pauses a
destination with its limit kept."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from executions.models import Destination, FanOut
from tests.support import helpers
from tests.support.clients import text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
WAIT = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 3600}}}


def _running_fanout(workspace: Any) -> Any:
    helpers.publish(workspace, "child", WAIT)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1, 2]})
    helpers.run_engine()
    return parent


def test_the_header_pauses_shows_the_banner_and_resumes(workspace: Any, operator: Any, viewer: Any) -> None:
    parent = _running_fanout(workspace)
    page = reverse("ui:execution-detail", args=[parent.pk])
    assert 'id="pause-execution"' in text(operator.get(page))
    assert viewer.post(reverse("ui:execution-pause", args=[parent.pk]), **HTMX).status_code == 403
    response = operator.post(reverse("ui:execution-pause", args=[parent.pk]), **HTMX)
    assert response.status_code == 200 and response["HX-Trigger"] == "sb-changed"
    body = text(operator.get(page))
    assert "Paused — drained" in body and 'id="resume-execution"' in body
    operator.post(reverse("ui:execution-resume", args=[parent.pk]), **HTMX)
    assert "pause-banner" not in text(operator.get(page))
    pauses = AuditEvent.objects.filter(action="execution.pause").order_by("id")
    assert list(pauses.values_list("outcome", flat=True)) == ["refused", "accepted"]


def test_the_fan_out_form_edits_and_the_panel_lists_the_edit(workspace: Any, operator: Any) -> None:
    parent = _running_fanout(workspace)
    url = reverse("ui:fanout-edit", args=[parent.pk, "fan"])
    assert operator.post(url, {"max_concurrency": "0"}, **HTMX).status_code == 400
    assert operator.post(url, {}, **HTMX).status_code == 400
    response = operator.post(url, {"max_concurrency": "5", "max_failures": "1"}, **HTMX)
    assert "maxConcurrency none → 5, maxFailures none → 1" in text(response)
    fan = FanOut.objects.get(execution=parent)
    assert (fan.max_concurrency, fan.max_failures) == (5, 1)
    panel = text(operator.get(reverse("ui:execution-fanout", args=[parent.pk, "fan"])))
    assert "edited by user:op at" in panel and "maxConcurrency none → 5" in panel


def test_the_rate_limits_row_pauses_and_resumes_a_destination(workspace: Any, operator: Any) -> None:
    destination = helpers.waiting_calls(workspace, 1, concurrency_limit=3)
    url = reverse("ui:destination-pause", args=[destination.pk])
    row = text(operator.post(url, {"paused": "1"}, **HTMX))
    assert "paused" in row and "limit kept: 3" in row
    assert Destination.objects.get(pk=destination.pk).paused and helpers.claim() == []
    operator.post(url, {"paused": "0"}, **HTMX)
    assert len(helpers.claim()) == 1
