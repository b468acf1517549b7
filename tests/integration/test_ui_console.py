"""The console's pages and posts without a browser: the workflow and version pages, starts
validated at their JSON paths, roles refused (and audited), and the
edited retry refused for what the API refuses too."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from executions.models import Execution
from tests.support import helpers
from tests.support.clients import client_for, text
from workflows.models import AuditEvent, Role

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_workflow_and_version_pages_show_the_graph_and_the_diff(workspace):
    first = helpers.publish(workspace, "noop", helpers.NOOP)
    second = helpers.publish(workspace, "noop", {"start": "t", "vertices": {
        "t": {"type": "TASK", "handler": "demo.noop", "next": "done"}, "done": {"type": "SUCCEED"}}})
    viewer = client_for(workspace, Role.VIEWER)
    page = text(viewer.get(reverse("ui:workflow-detail", args=["noop"])))
    assert 'data-vertex="done"' in page and "Starting an execution needs the operator role." in page
    version = text(viewer.get(reverse("ui:version-detail", args=["noop", second.hash])))
    assert re.search(r'<span class="add">\+\s+"next": "done",?</span>', version), version
    assert re.search(r'<span class="del">-\s+"next": null,?</span>', version), version
    assert "Changes since" in version and first.short_hash in version
    assert "nothing to compare with" in text(viewer.get(reverse("ui:version-detail", args=["noop", first.hash])))
    assert viewer.get(reverse("ui:version-detail", args=["noop", "0" * 64])).status_code == 404
    assert viewer.get(reverse("ui:workflow-detail", args=["nope"])).status_code == 404


def test_a_start_is_validated_at_its_paths_and_needs_the_operator_role(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    start = reverse("ui:workflow-start", args=["noop"])
    operator = client_for(workspace, Role.OPERATOR, "oper")
    bad = operator.post(start, {"input": '{"a": [1, "\\u0000"]}'}, **HTMX)
    assert bad.status_code == 400 and 'data-path="$.a[1]"' in bad.content.decode()
    assert operator.post(start, {"input": "{"}, **HTMX).status_code == 400
    marker = operator.post(start, {"input": '{"entries": {"$upload": "x"}}'}, **HTMX)
    assert marker.status_code == 400 and 'data-path="$.input.entries"' in marker.content.decode()
    assert not Execution.objects.exists()
    started = operator.post(start, {"input": '{"a": 1}', "idempotency_key": "ui-1"}, **HTMX)
    execution = Execution.objects.get(idempotency_key="ui-1")
    assert started.status_code == 200 and started["HX-Redirect"] == f"/executions/{execution.pk}/"
    viewer = client_for(workspace, Role.VIEWER, "view")
    assert viewer.post(start, {"input": "{}"}, **HTMX).status_code == 403
    assert list(AuditEvent.objects.filter(action="execution.start").order_by("id")
                .values_list("actor", "outcome")) == [("user:oper", "refused"), ("user:oper", "accepted"),
                                                      ("user:view", "refused")]


def test_an_edited_retry_is_validated_and_refused_like_the_api(workspace):
    parent = helpers.run_fanout(workspace, 3, failing=(1,))
    child = Execution.objects.get(parent=parent, status="FAILED")
    url = reverse("ui:execution-retry-edited", args=[child.pk])
    operator = client_for(workspace, Role.OPERATOR, "oper")
    page = text(operator.get(reverse("ui:execution-detail", args=[child.pk])))
    assert "Retry with an edited input" in page
    assert operator.post(url, {"input": "[1,"}, **HTMX).status_code == 400
    assert operator.post(url, {}, **HTMX).status_code == 400  # no input is not "{}"
    done = operator.post(url, {"input": '{"i": 1, "fail": false}'}, **HTMX)
    assert done.status_code == 200 and "with the edited input" in done.content.decode()
    assert operator.post(url, {"input": "{}"}, **HTMX).status_code == 409  # no longer FAILED
    helpers.run_engine()
    assert helpers.refresh(child).status == "SUCCEEDED" and helpers.refresh(parent).status == "SUCCEEDED"
    assert "input edited" in text(operator.get(reverse("ui:execution-detail", args=[child.pk])))
