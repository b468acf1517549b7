"""Filtered bulk actions with an outcome ledger (issue 31 §5): ``POST …/children/retry`` and
``…/children/cancel`` with a filter answer 202 with an operation; workers act on each matched
child once, in batches, and ``GET /api/v1/operations/{id}`` shows matched, done, skipped (with
a reason per child) and the state. Operator role, audited, 400 naming the field for a bad
filter, nothing written then."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

from executions.core import bulk as bulk_core
from executions.models import BulkItem, BulkOperation, Event, Execution, Step
from executions.services import bulk as bulk_services
from tests.support import helpers
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

EXPIRED = timezone.now() - timedelta(hours=1)

OPEN = ["PENDING", "RUNNING"]
SLOW = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 600}}}


def failed_parent(workspace: Any, items: int = 10, failing: dict[int, str] | None = None) -> Execution:
    """A fan-out whose children at ``failing`` failed with the given messages (default: 1, 3, 5)."""
    failing = failing if failing is not None else {1: "boom", 3: "boom", 5: "boom"}
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    entries = [{"i": i, "fail": i in failing, "message": failing.get(i, "")} for i in range(items)]
    parent = helpers.start(workspace, "parent", {"items": entries})
    helpers.run_engine()
    return helpers.refresh(parent)


def post(workspace: Any, parent: Execution, action: str, body: Any, role: str = "operator") -> Any:
    return api(workspace, role).post(f"/api/v1/executions/{parent.pk}/children/{action}", body, format="json")


def started(workspace: Any, parent: Execution, action: str, body: Any) -> dict[str, Any]:
    return ok(post(workspace, parent, action, body), 202)


def operation(workspace: Any, op: str) -> dict[str, Any]:
    return ok(api(workspace, "viewer").get(f"/api/v1/operations/{op}"))


def child(parent: Execution, index: int) -> Execution:
    return Execution.objects.get(parent=parent, item_index=index)


def test_a_status_filter_retries_the_failed_children_once_and_the_operation_reports_it(workspace: Any) -> None:
    parent = failed_parent(workspace)
    assert parent.status == "FAILED"
    answer = started(workspace, parent, "retry", {"status": ["FAILED"]})
    assert answer["matched"] == 3
    read = operation(workspace, answer["operation"])
    assert (read["state"], read["matched"], read["done"], read["skipped"], read["pending"]) == ("running", 3, 0, 0, 3)
    assert bulk_services.run_due() == 1
    read = operation(workspace, answer["operation"])
    assert (read["state"], read["done"], read["skipped"], read["pending"]) == ("succeeded", 3, 0, 0)
    assert read["finished_at"] and read["action"] == "retry" and read["filter"] == {"status": ["FAILED"]}
    assert sorted(Execution.objects.filter(parent=parent, attempt=2).values_list("item_index", flat=True)) == [1, 3, 5]
    assert helpers.refresh(parent).status == "RUNNING"  # redrive: the merge re-opened (as retry-failed)
    assert Step.objects.filter(execution__parent=parent, status="READY").count() == 3
    assert bulk_services.run_due() == 0  # nothing left: running it again acts on nobody
    assert Execution.objects.filter(parent=parent, attempt=3).count() == 0


def test_error_contains_and_indexes_select_children_and_the_others_are_skipped_with_a_reason(workspace: Any) -> None:
    parent = failed_parent(workspace, failing={1: "HTTP 503 ledger unavailable", 2: "HTTP 409 conflict",
                                               4: "HTTP 503 LEDGER unavailable"})
    by_error = started(workspace, parent, "retry", {"error_contains": "ledger"})
    assert by_error["matched"] == 2
    by_index = started(workspace, parent, "retry", {"indexes": [0, 2, 4, 99]})
    assert by_index["matched"] == 3  # 99 is no child
    bulk_services.run_due()
    first, second = operation(workspace, by_error["operation"]), operation(workspace, by_index["operation"])
    assert (first["done"], first["skipped"]) == (2, 0)
    # Index 4 was retried by the first operation: it is not failed any more; 0 never failed.
    assert (second["done"], second["skipped"]) == (1, 2)
    assert {(s["item_index"], s["reason"]) for s in second["skipped_children"]} == {
        (0, "not failed any more (SUCCEEDED)"), (4, "not failed any more (PENDING)")}
    assert second["skipped_reasons"] == {"not failed any more (SUCCEEDED)": 1, "not failed any more (PENDING)": 1}
    assert [child(parent, i).attempt for i in range(5)] == [1, 2, 2, 1, 2]


def test_terms_are_anded_and_a_spawner_narrows_them(workspace: Any) -> None:
    parent = failed_parent(workspace, failing={1: "ledger down", 2: "ledger down", 3: "other"})
    answer = started(workspace, parent, "retry", {"status": ["FAILED"], "error_contains": "ledger",
                                                  "indexes": [2, 3], "spawner": "fan"})
    assert answer["matched"] == 1
    assert started(workspace, parent, "retry", {"status": ["FAILED"], "spawner": "nope"})["matched"] == 0
    bulk_services.run_due()
    assert [child(parent, i).attempt for i in (1, 2, 3)] == [1, 2, 1]


def test_item_keys_select_children_by_their_business_key(workspace: Any) -> None:
    """The SPAWNER's itemKey (issue 31 §4) as a filter term: the children with those keys."""
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    doc = helpers.fanout_doc()
    doc["vertices"]["fan"]["itemKey"] = "$.item.id"
    helpers.publish(workspace, "parent", doc)
    entries = [{"id": f"e-{i}", "fail": i in (1, 3, 5), "message": "boom"} for i in range(8)]
    parent = helpers.start(workspace, "parent", {"items": entries})
    helpers.run_engine()
    answer = started(workspace, parent, "retry", {"item_keys": ["e-1", "e-5", "e-6", "nobody"]})
    assert answer["matched"] == 3
    bulk_services.run_due()
    read = operation(workspace, answer["operation"])
    assert (read["done"], read["skipped"]) == (2, 1)
    skipped = [(s["item_index"], s["reason"]) for s in read["skipped_children"]]
    assert skipped == [(6, "not failed any more (SUCCEEDED)")]
    assert [child(parent, i).attempt for i in range(8)] == [1, 2, 1, 1, 1, 2, 1, 1]


def test_an_operation_that_matches_nothing_is_finished_at_once(workspace: Any) -> None:
    parent = failed_parent(workspace)
    answer = started(workspace, parent, "retry", {"error_contains": "no such error"})
    assert answer["matched"] == 0
    assert operation(workspace, answer["operation"])["state"] == "succeeded"


def test_a_purged_tree_skips_its_children_as_purged(workspace: Any) -> None:
    parent = failed_parent(workspace)
    answer = started(workspace, parent, "retry", {"status": ["FAILED"]})
    Execution.objects.filter(pk=parent.pk).update(payloads_purged_at=Now())  # retention began on the tree (S19)
    bulk_services.run_due()
    read = operation(workspace, answer["operation"])
    assert (read["done"], read["skipped"], read["skipped_reasons"]) == (0, 3, {"purged": 3})
    assert Execution.objects.filter(parent=parent, attempt=2).count() == 0


def test_children_that_cannot_be_retried_say_why(workspace: Any) -> None:
    fail_vertex = {"start": "x", "vertices": {"x": {"type": "FAIL", "error": "by design"}}}
    helpers.publish(workspace, "child", fail_vertex)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1, 2]})
    helpers.run_engine()
    answer = started(workspace, parent, "retry", {"status": ["FAILED"]})
    bulk_services.run_due()
    assert operation(workspace, answer["operation"])["skipped_reasons"] == {"failed on a FAIL vertex": 2}


@pytest.mark.parametrize(("body", "fields"), [
    ({}, ["status", "error_contains", "indexes", "error_signature"]),
    ({"spawner": "fan"}, ["status", "error_contains", "indexes", "error_signature", "item_keys"]),
    ({"item_keys": []}, ["item_keys"]),
    ({"item_keys": [1]}, ["item_keys"]),
    ({"item_keys": "e-1"}, ["item_keys"]),
    ({"status": []}, ["status"]),
    ({"status": ["BROKEN"]}, ["status"]),
    ({"indexes": [-1]}, ["indexes"]),
    ({"indexes": "1"}, ["indexes"]),
    ({"error_contains": ""}, ["error_contains"]),
    ({"error_contains": "a\x00b"}, ["error_contains"]),
    ([1, 2], None),
])
def test_a_bad_filter_is_a_400_naming_the_field_and_writes_nothing(workspace: Any, body: Any,
                                                                  fields: list[str] | None) -> None:
    parent = failed_parent(workspace)
    for action in ("retry", "cancel"):
        answer = problem(post(workspace, parent, action, body), 400)
        if fields is not None:
            named = {(e.get("field") or e["path"].removeprefix("$.")).split(".")[0] for e in answer["errors"]}
            assert sorted(named & set(fields)) == sorted(fields), answer
    assert not BulkOperation.objects.exists()
    assert not BulkItem.objects.exists()


def test_the_service_checks_the_filter_the_same_way() -> None:
    with pytest.raises(bulk_services.Invalid, match="at least one filter term"):
        bulk_services.check_filter({"spawner": "fan"})
    with pytest.raises(bulk_services.Invalid, match="indexes"):
        bulk_services.check_filter({"indexes": [True]})
    assert bulk_core.filter_sql({"status": ["FAILED"]}).endswith("c.status = ANY(%(status)s::varchar[])")


def test_the_operator_role_is_needed_the_workspace_is_kept_and_it_is_audited(workspace: Any,
                                                                           other_workspace: Any) -> None:
    parent = failed_parent(workspace)
    problem(post(workspace, parent, "retry", {"status": ["FAILED"]}, role="viewer"), 403)
    problem(post(other_workspace, parent, "retry", {"status": ["FAILED"]}), 404)
    answer = started(workspace, parent, "retry", {"status": ["FAILED"]})
    problem(api(other_workspace, "admin").get(f"/api/v1/operations/{answer['operation']}"), 404)
    problem(api(workspace, "admin").get("/api/v1/operations/00000000-0000-0000-0000-000000000000"), 404)
    events = list(AuditEvent.objects.filter(action="execution.children-retry").order_by("id"))
    assert [e.outcome for e in events] == ["refused", "refused", "accepted"]
    assert events[-1].detail == {"filter": {"status": ["FAILED"]}, "operation": answer["operation"], "matched": 3}
    assert events[-1].target == str(parent.pk)


def test_a_cancelled_parent_refuses_a_bulk_retry(workspace: Any) -> None:
    helpers.publish(workspace, "child", SLOW)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1, 2]})
    helpers.run_engine()
    ok(api(workspace, "operator").post(f"/api/v1/executions/{parent.pk}/cancel"))
    problem(post(workspace, parent, "retry", {"status": ["CANCELLED"]}), 409)


def test_a_bulk_cancel_cancels_the_matched_open_children_and_everything_under_them(workspace: Any) -> None:
    helpers.publish(workspace, "grandchild", SLOW)
    helpers.publish(workspace, "child", helpers.fanout_doc("grandchild"))
    helpers.publish(workspace, "parent", helpers.fanout_doc("child"))
    parent = helpers.start(workspace, "parent", {"items": [{"items": [1, 2]} for _ in range(4)]})
    helpers.run_engine()
    assert Execution.objects.filter(parent__parent=parent, status__in=OPEN).count() == 8
    answer = started(workspace, parent, "cancel", {"indexes": [0, 2]})
    bulk_services.run_due()
    read = operation(workspace, answer["operation"])
    assert (read["state"], read["done"], read["skipped"]) == ("succeeded", 2, 0)
    assert [child(parent, i).status for i in range(4)] == ["CANCELLED", "RUNNING", "CANCELLED", "RUNNING"]
    under = Execution.objects.filter(parent__parent=parent)
    assert sorted(under.filter(status="CANCELLED").values_list("parent__item_index", flat=True)) == [0, 0, 2, 2]
    assert under.filter(status__in=["PENDING", "RUNNING"]).count() == 4
    again = started(workspace, parent, "cancel", {"indexes": [0, 1]})
    bulk_services.run_due()
    read = operation(workspace, again["operation"])
    assert (read["done"], read["skipped"], read["skipped_reasons"]) == (1, 1, {"already CANCELLED": 1})


def test_a_cancel_sealed_by_a_worker_that_died_is_swept_by_the_next(workspace: Any) -> None:
    """A worker that sealed a batch and died before the sweep: the next one sweeps first."""
    helpers.publish(workspace, "grandchild", SLOW)
    helpers.publish(workspace, "child", helpers.fanout_doc("grandchild"))
    helpers.publish(workspace, "parent", helpers.fanout_doc("child"))
    parent = helpers.start(workspace, "parent", {"items": [{"items": [1, 2]} for _ in range(2)]})
    helpers.run_engine()
    answer = started(workspace, parent, "cancel", {"indexes": [0]})
    with connection.cursor() as cursor:
        claimed = bulk_core.claim(cursor, worker="dead", lease_seconds=30)
    assert claimed is not None
    bulk_services._cancel_batch(claimed, "dead", "cancel by a worker that dies")  # the seal, no sweep
    assert child(parent, 0).status == "CANCELLED"
    assert Execution.objects.filter(parent__parent=parent, status__in=OPEN).count() == 4
    BulkOperation.objects.filter(pk=answer["operation"]).update(lease_expires_at=EXPIRED)  # its lease expires
    bulk_services.run_due()
    assert Execution.objects.filter(parent=child(parent, 0), status="CANCELLED").count() == 2
    assert Execution.objects.filter(parent=child(parent, 1), status__in=OPEN).count() == 2
    assert (operation(workspace, answer["operation"])["done"]) == 1


def test_a_worker_whose_lease_expired_stops_and_the_next_acts_on_each_child_once(workspace: Any,
                                                                               settings: Any) -> None:
    settings.SB = {**settings.SB, "BULK_BATCH": 2}
    parent = failed_parent(workspace, items=8, failing={i: "boom" for i in range(8)})
    answer = started(workspace, parent, "retry", {"status": ["FAILED"]})
    with connection.cursor() as cursor:
        slow = bulk_core.claim(cursor, worker="slow", lease_seconds=30)
    assert slow is not None
    message = "retry by the slow worker"
    assert bulk_services._retry_batch(slow, "slow", message) is True  # 2 children
    BulkOperation.objects.filter(pk=answer["operation"]).update(lease_expires_at=EXPIRED)  # it stalled
    with connection.cursor() as cursor:
        taken = bulk_core.claim(cursor, worker="next", lease_seconds=30)
    assert taken is not None
    assert bulk_services._retry_batch(slow, "slow", message) is None  # fenced off: not its operation now
    assert bulk_services.run(taken, "next") is True
    read = operation(workspace, answer["operation"])
    assert (read["done"], read["skipped"], read["state"]) == (8, 0, "succeeded")
    assert sorted(Execution.objects.filter(parent=parent).values_list("attempt", flat=True)) == [2] * 8
    retried = Event.objects.filter(execution__parent=parent, step__isnull=True, from_status="FAILED",
                                   to_status="PENDING")
    assert retried.count() == 8 and retried.values("execution").distinct().count() == 8  # each child once


def test_the_operation_list_of_the_children_reads_its_ledger_in_item_order(workspace: Any) -> None:
    parent = failed_parent(workspace, items=6, failing={5: "x", 1: "x"})
    answer = started(workspace, parent, "retry", {"status": ["FAILED", "SUCCEEDED"]})
    positions = list(BulkItem.objects.filter(operation_id=answer["operation"]).order_by("position")
                     .values_list("child", flat=True))
    assert positions == [child(parent, i).pk for i in range(6)]
