"""Cancel the unfinished children of any execution in one action (issue 14 §2, S18): the API's
``POST /api/v1/executions/{id}/children/cancel-open`` and the execution view's button, both
operator-only and audited, also after the parent finished."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from executions.core import state
from executions.models import Execution
from tests.support import helpers
from tests.support.clients import api, client_for, ok, problem, text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
SLOW = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 600}}}


def finished_parent_with_open_children(workspace: Any, n: int = 4) -> Execution:
    helpers.publish(workspace, "child", SLOW)
    helpers.publish(workspace, "parent", helpers.fanout_doc("child"))
    parent = helpers.start(workspace, "parent", {"items": list(range(n))})
    helpers.run_engine()
    with connection.cursor() as cursor:  # the parent ends while its children wait
        state.cancel_open_steps(cursor, [parent.pk], message="test")
        state.cancel_executions(cursor, [parent.pk], message="test")
    return parent


def open_children(parent: Execution) -> int:
    return Execution.objects.filter(parent=parent, status__in=["PENDING", "RUNNING"]).count()


def test_the_api_cancels_the_open_children_of_a_finished_parent(workspace: Any) -> None:
    parent = finished_parent_with_open_children(workspace)
    path = f"/api/v1/executions/{parent.pk}/children/cancel-open"
    problem(api(workspace, "viewer").post(path), 403)
    assert open_children(parent) == 4
    assert ok(api(workspace, "operator").post(path)) == {"cancelled": 4}
    assert open_children(parent) == 0
    assert ok(api(workspace, "operator").post(path)) == {"cancelled": 0}
    outcomes = list(AuditEvent.objects.filter(action="execution.cancel-open-children")
                    .order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["refused", "accepted", "accepted"]


def test_another_workspace_cannot_cancel_them(workspace: Any, other_workspace: Any) -> None:
    parent = finished_parent_with_open_children(workspace)
    problem(api(other_workspace, "operator").post(f"/api/v1/executions/{parent.pk}/children/cancel-open"), 404)
    assert open_children(parent) == 4


def test_the_execution_view_offers_the_button_and_it_works(workspace: Any) -> None:
    parent = finished_parent_with_open_children(workspace)
    operator = client_for(workspace, "operator")
    page = text(operator.get(reverse("ui:execution-fanout", args=[parent.pk, "fan"]), **HTMX))
    assert "Cancel open children (4)" in page
    response = operator.post(reverse("ui:cancel-open-children", args=[parent.pk]), **HTMX)
    assert response.status_code == 200
    assert "Cancelled 4 unfinished child executions." in text(response)
    assert open_children(parent) == 0
    page = text(operator.get(reverse("ui:execution-fanout", args=[parent.pk, "fan"]), **HTMX))
    assert "Cancel open children" not in page
    viewer = client_for(workspace, "viewer", "watcher")
    assert viewer.post(reverse("ui:cancel-open-children", args=[parent.pk]), **HTMX).status_code == 403
