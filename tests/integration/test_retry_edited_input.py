"""A failed child retried with an edited input (issue 16, part 6): the edit is validated,
replaces the child's input, is noted in its events and the audit log, and the retry runs
on it."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Event, Execution
from executions.selectors import payloads as payload_reads
from tests.support import helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db


def _failed_child(workspace: Any) -> tuple[Execution, Execution]:
    parent = helpers.run_fanout(workspace, 3, failing=(1,))
    assert parent.status == "FAILED"
    return parent, Execution.objects.get(parent=parent, status="FAILED")


def test_a_failed_child_retried_with_a_fixed_input_succeeds_and_the_parent_with_it(workspace: Any) -> None:
    parent, child = _failed_child(workspace)
    client = api(workspace, "operator")
    result = ok(client.post(f"/api/v1/executions/{child.pk}/retry", {"input": {"i": 1, "fail": False}},
                            format="json"))
    assert result["execution"]["status"] == "PENDING" and result["step"]["attempt"] == 2
    assert payload_reads.input_of(child) == {"i": 1, "fail": False}
    note = Event.objects.filter(execution_id=child.pk, message__startswith="input edited").get()
    assert note.message.startswith("input edited by token:") and "for this retry" in note.message
    audit = AuditEvent.objects.get(action="execution.retry", outcome="accepted")
    assert audit.target == str(child.pk) and audit.detail == {"input_edited": True}
    helpers.run_engine()
    assert helpers.refresh(child).status == "SUCCEEDED"
    assert helpers.refresh(parent).status == "SUCCEEDED"


def test_an_unstorable_edit_or_a_child_that_is_not_failed_changes_nothing(workspace: Any) -> None:
    _, child = _failed_child(workspace)
    client = api(workspace, "operator")
    url = f"/api/v1/executions/{child.pk}/retry"
    bad = problem(client.post(url, b'{"input": {"a": "\\u0000"}}', content_type="application/json"), 400)
    assert bad["errors"][0]["path"] == "$.input.a"
    assert problem(client.post(url, {"input": 1, "extra": 2}, format="json"), 400)["errors"] == [
        {"field": "extra", "message": "unknown field"}]
    assert payload_reads.input_of(child) == {"i": 1, "fail": True}
    ok(client.post(url, format="json"))  # a plain retry still takes no body
    second = problem(client.post(url, {"input": {"i": 1}}, format="json"), 409)
    assert "only a FAILED execution" in second["detail"]
    assert payload_reads.input_of(child) == {"i": 1, "fail": True}
    assert not Event.objects.filter(execution_id=child.pk, message__startswith="input edited").exists()
    assert problem(api(workspace, "viewer").post(url, {"input": {}}, format="json"), 403)


def test_an_edited_input_naming_an_upload_is_refused_with_its_path(workspace: Any) -> None:
    """It was kept as literal text, so the retry ran on {"$upload": …} instead of a list."""
    _, child = _failed_child(workspace)
    edit = {"i": 1, "rows": {"$upload": "6f1c0e6a-0000-4000-8000-000000000000"}}
    refused = problem(api(workspace, "operator").post(f"/api/v1/executions/{child.pk}/retry", {"input": edit},
                                                      format="json"), 400)
    assert "cannot name an upload" in refused["detail"] and refused["errors"][0]["path"] == "$.input.rows"
    assert payload_reads.input_of(child) == {"i": 1, "fail": True} and helpers.refresh(child).status == "FAILED"
