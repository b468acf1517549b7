"""Data lifecycle (S19): payload retention and the purge of whole finished trees.

Every pass makes progress (emptied or purged rows are never selected again), works in
bounded batches and is index-driven; SUCCEEDED trees lose their payloads after
SB_PAYLOAD_RETENTION_SECONDS, FAILED and CANCELLED trees keep theirs until the whole tree
goes after SB_RETENTION_SECONDS; a retry that needs a purged payload is refused.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from executions import worker
from executions.core import calls as call_log
from executions.core import retention
from executions.models import Destination, DestinationCall, Event, Execution, FanOut, Payload, Step
from executions.services import lifecycle as services
from tests.support import helpers
from tests.support.clients import api, client_for, problem, text
from tests.support.threads import race
from workflows.errors import Conflict
from workflows.models import AuditEvent, Role

DAY = 24 * 3600
TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}


def age_tree(root: Execution, seconds: float) -> None:
    """Every execution of ``root``'s tree finished ``seconds`` ago."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_execution SET finished_at = now() - make_interval(secs => %s) "
                       "WHERE root_id = %s", [seconds, root.pk])


def tree_payloads(root: Execution) -> int:
    return Payload.objects.filter(execution__root=root).count()


def ages(settings: Any, *, payloads: float = 7 * DAY, trees: float = 30 * DAY) -> None:
    settings.SB = {**settings.SB, "PAYLOAD_RETENTION_SECONDS": payloads, "RETENTION_SECONDS": trees}


# --- payload retention ------------------------------------------------------------------------------

def test_a_pass_gets_past_executions_it_emptied_before(workspace, settings):
    """Today the pass picks 5,000 finished executions in no order, with no "still has payloads"
    condition: once 5,000 are emptied it deletes nothing, for ever."""
    ages(settings)
    version = helpers.publish(workspace, "noop", helpers.NOOP)
    with connection.cursor() as cursor:  # 5,001 old, finished, already emptied trees
        cursor.execute("""
            INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error,
                request_hash, root_id, depth, created_by, created_at, finished_at)
            SELECT g.id, %(ws)s, %(wf)s, %(v)s, 'SUCCEEDED', 1, '', '', g.id, 0, '', now() - interval '40 days',
                   now() - interval '20 days'
            FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 5001)) g
        """, {"ws": workspace.pk, "wf": version.definition_id, "v": version.pk})
    eligible = helpers.start(workspace, "noop", {"blob": "x" * 1000})
    helpers.run_engine()
    age_tree(eligible, 8 * DAY)
    assert tree_payloads(eligible) == 1

    retention.run_pass()

    assert tree_payloads(eligible) == 0
    assert helpers.refresh(eligible).payloads_purged_at is not None


def test_a_failed_tree_keeps_its_payloads_and_stays_retryable(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 4, failing=[2])
    assert parent.status == "FAILED"
    age_tree(parent, 20 * DAY)
    before = tree_payloads(parent)

    retention.run_pass()

    assert tree_payloads(parent) == before, "a FAILED tree keeps its payloads until the whole tree is purged"
    failed = Execution.objects.get(parent=parent, item_index=2)
    services.retry_execution(failed)
    helpers.run_engine()
    assert Payload.objects.filter(execution=failed, name="input").exists()


def test_a_cancelled_tree_keeps_its_payloads(workspace, settings):
    ages(settings)
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1, 2, 3]})
    services.cancel_execution(parent)
    age_tree(parent, 20 * DAY)
    before = tree_payloads(parent)
    assert before >= 1

    retention.run_pass()

    assert tree_payloads(parent) == before


def test_a_succeeded_tree_loses_its_payloads_and_a_retry_needing_them_is_refused(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 4, failing=[1], merge_config=TOLERANT)
    assert parent.status == "SUCCEEDED"
    age_tree(parent, 6 * DAY)
    retention.run_pass()
    assert tree_payloads(parent) > 0, "younger than SB_PAYLOAD_RETENTION_SECONDS: kept"

    age_tree(parent, 8 * DAY)
    retention.run_pass()
    assert tree_payloads(parent) == 0
    purged_at = helpers.refresh(parent).payloads_purged_at
    assert purged_at is not None

    failed = Execution.objects.get(parent=parent, item_index=1)
    with pytest.raises(Conflict, match="payloads of its tree were deleted") as refused:
        services.retry_execution(failed)
    assert purged_at.isoformat(timespec="seconds") in str(refused.value)
    body = problem(api(workspace).post(f"/api/v1/executions/{failed.pk}/retry"), 409)
    assert "input" in body["detail"] and "deleted" in body["detail"]
    page = client_for(workspace, Role.OPERATOR, "op").post(reverse("ui:execution-retry", args=[failed.pk]),
                                                          HTTP_HX_REQUEST="true")
    assert page.status_code == 409 and "payloads of its tree were deleted at" in text(page)
    assert helpers.refresh(failed).status == "FAILED", "nothing runs with a missing input"
    detail = api(workspace).get(f"/api/v1/executions/{failed.pk}").json()
    assert detail["payloads_purged_at"] is not None and detail["input"] is None
    page = text(client_for(workspace, Role.VIEWER, "viewer").get(reverse("ui:execution-detail", args=[failed.pk])))
    assert "Payloads deleted by data retention at" in page
    with pytest.raises(Conflict, match="payloads of its tree were deleted"):
        services.retry_failed_children(parent)


def test_a_tree_with_an_unfinished_execution_keeps_everything(workspace, settings):
    """A spawner without a MERGE lets its parent succeed while children still run."""
    ages(settings)
    helpers.publish(workspace, "child", {"start": "t", "vertices": {"t": {"type": "TIMER", "seconds": 3600,
                                                                         "next": "d"},
                                                                   "d": {"type": "SUCCEED"}}})
    helpers.publish(workspace, "parent", {"start": "fan", "vertices": {
        "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "done"},
        "done": {"type": "SUCCEED"}}})
    parent = helpers.start(workspace, "parent", {"items": [1, 2]})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED" and Execution.objects.filter(parent=parent, status="RUNNING").count() == 2
    age_tree(parent, 40 * DAY)
    before = tree_payloads(parent)

    retention.run_pass()

    assert Execution.objects.filter(root=parent).count() == 3 and tree_payloads(parent) == before


# --- purge of whole trees -----------------------------------------------------------------------

def test_whole_finished_trees_are_purged_after_the_retention_age(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 5, failing=[0, 3])
    assert parent.status == "FAILED"
    young = helpers.run_fanout(workspace, 2)
    age_tree(parent, 31 * DAY)
    age_tree(young, 29 * DAY)
    succeeded = Execution.objects.get(parent=parent, item_index=1)
    problem(api(workspace).post(f"/api/v1/executions/{succeeded.pk}/retry"), 409)  # audited, refused
    audits = AuditEvent.objects.count()
    assert audits > 0

    retention.run_pass()

    assert not Execution.objects.filter(root=parent).exists()
    ids = [parent.pk]
    assert not Step.objects.filter(execution_id__in=ids).exists()
    assert not Event.objects.filter(execution_id__in=ids).exists()
    assert not FanOut.objects.filter(execution_id__in=ids).exists()
    assert not Payload.objects.filter(execution_id__in=ids).exists()
    assert Execution.objects.filter(root=young).count() == 3, "younger than SB_RETENTION_SECONDS: kept"
    assert AuditEvent.objects.count() == audits, "audit events are never purged"


def test_a_purge_cut_short_leaves_a_consistent_tree_that_the_next_pass_finishes(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 7, failing=[1])
    age_tree(parent, 31 * DAY)
    with connection.cursor() as cursor:  # the next pass is interrupted after one batch of 3
        cursor.execute(retention.LOCK_ROOT, {"root": parent.pk})
        cursor.execute(retention.FREEZE_FOR_PURGE, {"root": parent.pk})
    report = retention.Report()
    budget = retention._Budget(None)
    budget.spent = iter([False, True]).__next__  # type: ignore[method-assign]  # one batch, then stop
    assert retention._purge_tree(report, parent.pk, budget, 3) is False
    assert report.executions_deleted == 3 and Execution.objects.filter(root=parent).count() == 5

    retention.run_pass(batch=3)

    assert not Execution.objects.filter(root=parent).exists()


def test_a_purged_execution_leaves_the_one_chained_from_it_alone(workspace, settings):
    ages(settings)
    helpers.publish(workspace, "next", helpers.NOOP)
    helpers.publish(workspace, "first", {"start": "c", "vertices": {"c": {"type": "CHAIN", "workflow": "next"}}})
    first = helpers.start(workspace, "first", {"n": 1})
    helpers.run_engine()
    chained = Execution.objects.get(chained_from=first)
    age_tree(first, 31 * DAY)

    report = retention.run_pass()

    assert report.trees_purged == 1 and not Execution.objects.filter(pk=first.pk).exists()
    chained = helpers.refresh(chained)
    assert chained.chained_from_id is None and Payload.objects.filter(execution=chained).exists()


def test_payload_deletion_resumes_where_a_pass_stopped(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 6, merge_config=TOLERANT)
    age_tree(parent, 8 * DAY)
    total = tree_payloads(parent)
    assert retention._freeze(retention.FREEZE_FOR_PAYLOADS, parent.pk)
    report = retention.Report()
    budget = retention._Budget(None)
    budget.spent = iter([False, True]).__next__  # type: ignore[method-assign]  # one batch, then stop
    assert retention._tree_payloads(report, parent.pk, budget, 2) is False
    assert 0 < report.payloads_deleted < total and helpers.refresh(parent).retention_after is not None

    second = retention.run_pass(batch=2)

    assert tree_payloads(parent) == 0 and report.payloads_deleted + second.payloads_deleted == total
    assert helpers.refresh(parent).retention_after is None


def test_sb_gc_runs_a_pass_and_prints_its_figures(workspace, settings, capsys):
    ages(settings)
    purged = helpers.run_fanout(workspace, 3, failing=[0])
    emptied = helpers.run_fanout(workspace, 2)
    age_tree(purged, 31 * DAY)
    age_tree(emptied, 8 * DAY)
    payload_rows, payload_bytes = tree_payloads(purged) + tree_payloads(emptied), sum(
        Payload.objects.filter(execution__root__in=[purged, emptied]).values_list("size_bytes", flat=True))

    call_command("sb_gc", "--dry-run", "--json")
    dry = json.loads(capsys.readouterr().out)
    assert Execution.objects.filter(root=purged).count() == 4 and tree_payloads(emptied) > 0, "dry: nothing deleted"
    call_command("sb_gc", "--json")
    real = json.loads(capsys.readouterr().out)

    assert set(real) == {"trees_purged", "executions_deleted", "payloads_deleted", "bytes_freed", "seconds"}
    assert real["trees_purged"] == 1 and real["executions_deleted"] == 4
    assert real["payloads_deleted"] == payload_rows and real["bytes_freed"] == payload_bytes
    assert {k: v for k, v in dry.items() if k != "seconds"} == {k: v for k, v in real.items() if k != "seconds"}
    call_command("sb_gc")
    assert capsys.readouterr().out.startswith("deleted: 0 trees (0 executions), 0 payloads")


def test_the_retention_candidates_are_found_through_indexes(workspace):
    """At millions of rows a pass must not scan the execution table: its candidate and tree
    queries each read a (partial) index."""
    version = helpers.publish(workspace, "noop", helpers.NOOP)
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO executions_execution (id, workspace_id, workflow_id, version_id, status, attempt, error,
                request_hash, root_id, depth, created_by, created_at, finished_at)
            SELECT g.id, %(ws)s, %(wf)s, %(v)s, (ARRAY['SUCCEEDED', 'RUNNING', 'FAILED'])[1 + g.n %% 3], 1, '', '',
                   g.id, 0, '', now(), CASE WHEN g.n %% 3 <> 1 THEN now() - make_interval(secs => g.n) END
            FROM (SELECT gen_random_uuid() AS id, n FROM generate_series(1, 30000) n) g
        """, {"ws": workspace.pk, "wf": version.definition_id, "v": version.pk})
        cursor.execute("ANALYZE executions_execution")
        params = {"age": 60.0, "after_at": "-infinity", "after_id": retention.ZERO, "limit": 2000,
                  "root": retention.ZERO, "depth": -1, "after": retention.ZERO}
        plans = {}
        for name in ("PURGE_CANDIDATES", "PAYLOAD_CANDIDATES", "UNDER_WAY", "TREE_BOTTOM", "TREE_AFTER"):
            cursor.execute("EXPLAIN " + getattr(retention, name), params)
            plans[name] = "\n".join(row[0] for row in cursor.fetchall())
    expected = {"PURGE_CANDIDATES": "execution_finished_roots", "PAYLOAD_CANDIDATES": "execution_payload_retention",
                "UNDER_WAY": "execution_retention_under_way", "TREE_BOTTOM": "execution_root_tree",
                "TREE_AFTER": "execution_root_tree"}
    for name, index in expected.items():
        assert index in plans[name] and "Seq Scan" not in plans[name], f"{name}:\n{plans[name]}"


@pytest.mark.django_db(transaction=True)
def test_the_scheduled_tick_runs_the_same_pass(workspace, settings):
    ages(settings)
    parent = helpers.run_fanout(workspace, 2, failing=[1])
    age_tree(parent, 31 * DAY)

    result = worker.tick()

    assert result["trees_purged"] == 1 and result["executions_deleted"] == 3
    assert not Execution.objects.filter(pk=parent.pk).exists()


def test_events_are_deleted_by_retention_only(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    execution = helpers.start(workspace, "noop", {})
    helpers.run_engine()
    with pytest.raises(DatabaseError, match="append-only; only data retention deletes them"), \
            transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM executions_event WHERE execution_id = %s", [execution.pk])
    assert Event.objects.filter(execution=execution).exists()


@pytest.mark.django_db(transaction=True)
def test_a_retry_racing_the_freeze_of_its_tree_never_runs_without_its_input(workspace, settings, monkeypatch):
    """The retry has moved its child (uncommitted) when retention freezes the tree and deletes
    its payloads: the freeze cannot see the move, so the retry must see the stamp — it locks
    the root last — and roll back."""
    ages(settings)
    parent = helpers.run_fanout(workspace, 3, failing=[1], merge_config=TOLERANT)
    age_tree(parent, 8 * DAY)
    failed = Execution.objects.get(parent=parent, item_index=1)
    moved, frozen = threading.Event(), threading.Event()
    original = retention.require_payloads

    def paused(cursor: Any, ids: Any) -> None:
        moved.set()
        assert frozen.wait(30)
        original(cursor, ids)

    monkeypatch.setattr(retention, "require_payloads", paused)

    def retry() -> str:
        try:
            services.retry_execution(failed)
        except Conflict as refused:
            return str(refused)
        return "retried"

    def gc() -> int:
        assert moved.wait(30)
        report = retention.run_pass()
        frozen.set()
        return report.payloads_deleted

    outcome, deleted = race(retry, gc)

    assert deleted > 0 and outcome.startswith("cannot retry: the payloads of its tree were deleted at")
    assert helpers.refresh(failed).status == "FAILED" and not Step.objects.filter(execution=failed, status="READY")


# --- the destination call log -----------------------------------------------------------------

def test_old_call_log_rows_go_in_batches_and_recent_ones_stay(workspace, settings):
    """The call log grew for ever (a row per outbound call, never deleted): a pass now deletes
    rows older than SB_CALL_LOG_RETENTION_SECONDS, per destination, a batch per transaction."""
    settings.SB = {**settings.SB, "CALL_LOG_RETENTION_SECONDS": 7 * DAY}
    first = Destination.objects.create(workspace=workspace, name="one", base_url="https://one.example")
    second = Destination.objects.create(workspace=workspace, name="two", base_url="https://two.example")
    with connection.cursor() as cursor:
        for destination, old, recent in ((first, 5, 2), (second, 3, 1)):
            for age_days, count in ((8, old), (1, recent)):
                cursor.execute(
                    "INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, "
                    "error, created_at) SELECT %s, NULL, 200, true, 5.0, '', now() - make_interval(days => %s) "
                    "FROM generate_series(1, %s)", [destination.pk, age_days, count])

    report = retention.run_pass(batch=2)

    assert report.calls_deleted == 8
    assert DestinationCall.objects.filter(destination=first).count() == 2
    assert DestinationCall.objects.filter(destination=second).count() == 1
    assert "calls_deleted" not in report.as_dict(), "sb_gc prints the issue's keys only"
    assert retention.run_pass().calls_deleted == 0


def test_the_call_log_purge_reads_its_index(workspace):
    destination = Destination.objects.create(workspace=workspace, name="one", base_url="https://one.example")
    inner = call_log.DELETE_OLD_CALLS.split("IN (", 1)[1].rsplit(")", 1)[0]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {inner}", {"destination": destination.pk, "age": 60, "limit": 10})
        plan = json.dumps(cursor.fetchone()[0])
    assert "call_destination_recent" in plan and "Seq Scan" not in plan, plan
