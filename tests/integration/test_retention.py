"""Data lifecycle (S19): payload retention and the purge of whole finished trees.

Every pass makes progress (emptied or purged rows are never selected again), works in
bounded batches and is index-driven; SUCCEEDED trees lose their payloads after
SB_PAYLOAD_RETENTION_SECONDS, FAILED and CANCELLED trees keep theirs until the whole tree
goes after SB_RETENTION_SECONDS; a retry that needs a purged payload is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from executions import retention, services, worker
from executions.models import Event, Execution, FanOut, Payload, Step
from tests.support import helpers
from tests.support.clients import api, problem
from workflows.errors import Conflict
from workflows.models import AuditEvent

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
    assert helpers.refresh(failed).status == "FAILED", "nothing runs with a missing input"
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
    audits = AuditEvent.objects.count()
    api(workspace).post(f"/api/v1/executions/{Execution.objects.filter(parent=parent).first().pk}/retry")
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
