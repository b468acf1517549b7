"""Errors an operator can act on (issue 33 §3): a parent's failed children grouped by error
signature — the error with numbers, ids and quoted values taken out, HTTP status codes kept —
each with its count and an example, and "Retry this group" through the bulk retry service
(issue 31 §5), in the API and the execution view."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

from executions.models import BulkOperation, Execution
from executions.services import bulk as bulk_services
from tests.support import helpers
from tests.support.clients import api, client_for, ok, problem, text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def ledger_error(i: int) -> str:
    return f"POST http://127.0.0.1:8001/ledger/entries/e-{48000 + i} returned HTTP 503: ledger unavailable ({i} ms)"


def parent_with_groups(workspace: Any) -> Execution:
    failing = {i: ledger_error(i) for i in range(0, 8)}
    failing |= {8: f"HTTP 409 conflict on 'acct-8' id {uuid.uuid4()}", 9: f"HTTP 409 conflict on 'x' id {uuid.uuid4()}"}
    failing |= {10: "checksum 0xdeadbeef mismatch", 11: "checksum 9f86d081884c7d65 mismatch"}
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    entries = [{"i": i, "fail": i in failing, "message": failing.get(i, "")} for i in range(14)]
    parent = helpers.start(workspace, "parent", {"items": entries})
    helpers.run_engine()
    return helpers.refresh(parent)


def signature(error: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sb_error_signature(%s)", [error])
        return str(cursor.fetchone()[0])


def test_the_signature_takes_out_numbers_ids_and_quoted_values_and_keeps_the_status_code() -> None:
    assert signature(ledger_error(1)) == signature(ledger_error(777))
    assert signature(ledger_error(1)).endswith("returned HTTP 503: ledger unavailable (N ms)")
    assert signature(f"HTTP 409 conflict on 'a' {uuid.uuid4()}") == "HTTP 409 conflict on '…' <id>"
    assert signature('bad "value" 0xABCDEF and deadbeef12') == "bad '…' <id> and <id>"
    assert signature("") == ""
    assert signature(ledger_error(1)) != signature(ledger_error(1).replace("503", "502"))


def test_the_api_lists_the_groups_largest_first_with_an_example(workspace: Any) -> None:
    parent = parent_with_groups(workspace)
    groups = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children/error-groups"))
    assert [g["count"] for g in groups] == [8, 2, 2]
    ledger = groups[0]
    assert "HTTP 503: ledger unavailable" in ledger["signature"] and "48001" not in ledger["signature"]
    example = Execution.objects.get(pk=ledger["example"])
    assert example.parent_id == parent.pk and example.item_index == ledger["example_index"] < 8
    assert ledger["example_error"].endswith(f"e-{48000 + example.item_index} returned HTTP 503: ledger unavailable "
                                            f"({example.item_index} ms)")
    problem(api(workspace, "viewer").get(f"/api/v1/executions/{uuid.uuid4()}/children/error-groups"), 404)


def test_retrying_a_group_retries_exactly_its_children(workspace: Any) -> None:
    parent = parent_with_groups(workspace)
    groups = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children/error-groups"))
    conflict = next(g for g in groups if "409" in g["signature"])
    answer = ok(api(workspace, "operator").post(f"/api/v1/executions/{parent.pk}/children/retry",
                                                {"error_signature": conflict["signature"]}, format="json"), 202)
    assert answer["matched"] == 2
    bulk_services.run_due()
    retried = Execution.objects.filter(parent=parent, attempt=2).values_list("item_index", flat=True)
    assert sorted(retried) == [8, 9]
    after = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children/error-groups"))
    assert [g["count"] for g in after] == [8, 2]


def test_the_execution_view_shows_the_groups_and_retries_a_group(workspace: Any) -> None:
    parent = parent_with_groups(workspace)
    operator = client_for(workspace, "operator")
    page = text(operator.get(f"/executions/{parent.pk}/"))
    assert f"/executions/{parent.pk}/bulk" in page  # the panel loads after the page
    panel = text(operator.get(f"/executions/{parent.pk}/bulk", **HTMX))
    assert panel.count(">Retry this group</button>") == 3 and "HTTP 503: ledger unavailable" in panel
    assert "8</strong> ×" in panel
    sig = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children/error-groups"))[0]["signature"]
    assert f'value="{sig}"' in panel  # the group's button posts it
    response = operator.post(f"/executions/{parent.pk}/children/bulk",
                             {"action": "retry", "status": "FAILED", "error_signature": sig}, **HTMX)
    assert response.status_code == 200 and "Bulk retry started: 8 matching children" in text(response)
    operation = BulkOperation.objects.get()
    assert operation.filter == {"status": ["FAILED"], "error_signature": sig}
    panel = text(operator.get(f"/executions/{parent.pk}/bulk", **HTMX))
    assert 'data-state="running"' in panel and "<span data-matched>8</span>" in panel
    bulk_services.run_due()
    panel = text(operator.get(f"/executions/{parent.pk}/bulk", **HTMX))
    assert 'data-state="succeeded"' in panel and "<span data-done>8</span>" in panel
    assert AuditEvent.objects.filter(action="execution.children-retry", outcome="accepted").count() == 1


def test_the_form_filters_by_status_error_and_indexes_and_cancels_too(workspace: Any) -> None:
    parent = parent_with_groups(workspace)
    operator = client_for(workspace, "operator")
    posted = operator.post(f"/executions/{parent.pk}/children/bulk",
                           {"action": "retry", "status": "FAILED", "error_contains": "checksum",
                            "indexes": "9-11, 13"}, **HTMX)
    assert "2 matching children" in text(posted)
    bad = operator.post(f"/executions/{parent.pk}/children/bulk", {"action": "retry", "indexes": "3-x"}, **HTMX)
    assert bad.status_code == 400 and "is not an index or a range" in text(bad)
    empty = operator.post(f"/executions/{parent.pk}/children/bulk", {"action": "cancel"}, **HTMX)
    assert empty.status_code == 400 and "at least one filter term" in text(empty)
    assert BulkOperation.objects.count() == 1


def test_a_viewer_sees_the_groups_but_no_buttons_and_cannot_post(workspace: Any) -> None:
    parent = parent_with_groups(workspace)
    viewer = client_for(workspace, "viewer")
    panel = text(viewer.get(f"/executions/{parent.pk}/bulk", **HTMX))
    assert "HTTP 503: ledger unavailable" in panel and "Retry this group" not in panel and "bulk-form" not in panel
    refused = viewer.post(f"/executions/{parent.pk}/children/bulk", {"action": "retry", "status": "FAILED"}, **HTMX)
    assert refused.status_code == 403
    assert not BulkOperation.objects.exists()
    assert AuditEvent.objects.filter(action="execution.children-retry", outcome="refused").count() == 1
