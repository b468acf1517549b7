"""Cancel is total (issue 14 §2, S18): after a cancel returns no descendant at any depth is
left to run — children a concurrent spawn batch committed included — and the spawner
creates nothing more; a failFast merge that fails cancels the unfinished children."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from executions.core import state
from executions.engine import runner as engine
from executions.fanout import spawn as fanout
from executions.models import Execution, Step
from executions.services import lifecycle as services
from executions.worker import Drain
from tests.support import factories, helpers
from tests.support.cluster import wait_for

OPEN = ("PENDING", "RUNNING")
OPEN_STEPS = ("READY", "RUNNING", "WAITING")
SLOW_CHILD = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 25}}}
FAIL_OR_WAIT = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.fail", "equals": True}, "next": "boom"}],
              "default": "wait"},
    "boom": {"type": "FAIL", "error": "bad entry"},
    "wait": {"type": "TIMER", "seconds": 25},
}}


def descendants_left_to_run(root: Execution) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("""
            WITH RECURSIVE d AS (SELECT id FROM executions_execution WHERE parent_id = %(root)s
                                 UNION ALL
                                 SELECT e.id FROM executions_execution e JOIN d ON e.parent_id = d.id)
            SELECT (SELECT count(*) FROM executions_execution e JOIN d USING (id)
                    WHERE e.status IN ('PENDING', 'RUNNING')),
                   (SELECT count(*) FROM executions_step s JOIN d ON s.execution_id = d.id
                    WHERE s.status IN ('READY', 'RUNNING', 'WAITING'))
        """, {"root": root.pk})
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_cancel_during_spawning_leaves_nothing_to_run(settings):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 50}
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", SLOW_CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(4000))})
    errors: list[BaseException] = []

    def spawn() -> None:
        try:
            Drain(max_seconds=30, idle_seconds=0.0, threads=1, batch=1, linger=False).run()
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    drain = threading.Thread(target=spawn)
    drain.start()
    deadline = time.monotonic() + 30
    while Execution.objects.filter(parent=parent).count() < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert helpers.step(parent, "fan").status == "RUNNING", "the cancel must race a running spawner"
    services.cancel_execution(parent, actor="op")
    assert descendants_left_to_run(parent) == (0, 0), "after a cancel returns, nothing under it may run"
    drain.join(timeout=60)
    assert not errors
    created = Execution.objects.filter(parent=parent).count()
    assert created < 4000, "the spawner stopped"
    assert helpers.step(parent, "fan").status == "CANCELLED"
    assert descendants_left_to_run(parent) == (0, 0)
    assert helpers.refresh(parent).status == "CANCELLED"


def test_cancel_reaches_every_depth(workspace):
    helpers.publish(workspace, "leaf", SLOW_CHILD)
    helpers.publish(workspace, "middle", helpers.fanout_doc("leaf"))
    helpers.publish(workspace, "top", helpers.fanout_doc("middle", item_input={"items": "$.item"}))
    top = helpers.start(workspace, "top", {"items": [[1, 2], [3, 4, 5]]})
    helpers.run_engine()
    assert Execution.objects.filter(root=top).exclude(pk=top.pk).count() == 2 + 5
    assert descendants_left_to_run(top)[0] > 0
    assert services.cancel_execution(top, actor="op") == 1 + 2 + 5
    assert descendants_left_to_run(top) == (0, 0)


def test_a_failfast_merge_that_fails_cancels_the_unfinished_children(workspace):
    helpers.publish(workspace, "child", FAIL_OR_WAIT)
    helpers.publish(workspace, "parent", helpers.fanout_doc(
        "child", merge_config={"failFast": True}))
    parent = helpers.start(workspace, "parent", {"items": [{"fail": i == 3} for i in range(40)]})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "FAILED"
    statuses = dict(helpers.child_counts(parent))
    assert statuses == {"FAILED": 1, "CANCELLED": 39}, "unfinished children are cancelled, not failed"
    assert descendants_left_to_run(parent) == (0, 0)
    assert "merge failed" in helpers.step(parent, "join").error


def test_a_spawner_stops_creating_children_once_failfast_has_decided(workspace, settings, monkeypatch):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 10}
    helpers.publish(workspace, "child", SLOW_CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc("child", merge_config={"failFast": True}))
    parent = helpers.start(workspace, "parent", {"items": list(range(100))})
    original = fanout._insert_batch

    def insert_and_fail_a_child(cursor, step, *args):
        created = original(cursor, step, *args)
        if args[-2] == 0:  # the first batch: one of its children fails at once, as a real one might
            child = Execution.objects.filter(parent_id=step.execution.id).order_by("item_index").first()
            state.cancel_open_steps(cursor, [child.pk], message="test")
            state.fail_executions(cursor, [child.pk], errors=["boom"], started=[None])
        return created

    monkeypatch.setattr(fanout, "_insert_batch", insert_and_fail_a_child)
    helpers.run_engine()
    assert Execution.objects.filter(parent=parent).count() == 10, "no batch after the merge was decided"
    assert helpers.refresh(parent).status == "FAILED"
    assert dict(helpers.child_counts(parent)) == {"FAILED": 1, "CANCELLED": 9}


def test_cancel_open_children_after_the_parent_finished(workspace):
    helpers.publish(workspace, "child", FAIL_OR_WAIT)
    helpers.publish(workspace, "parent", helpers.fanout_doc(
        "child", merge_config={"failFast": False}))
    parent = helpers.start(workspace, "parent", {"items": [{"fail": False}] * 5})
    helpers.run_engine()
    with connection.cursor() as cursor:  # the parent ends (an operator cancelled its merge, say)
        state.cancel_open_steps(cursor, [parent.pk], message="test")
        state.cancel_executions(cursor, [parent.pk], message="test")
    assert descendants_left_to_run(parent)[0] == 5
    assert services.cancel_open_children(helpers.refresh(parent), actor="op") == 5
    assert descendants_left_to_run(parent) == (0, 0)
    assert services.cancel_open_children(helpers.refresh(parent), actor="op") == 0
    assert Step.objects.filter(execution__parent=parent, status="CANCELLED").count() == 5


# A child whose first step's commit creates its next step.
TWO_STEPS = {"start": "first", "vertices": {
    "first": {"type": "TASK", "handler": "test.increment", "next": "second"},
    "second": {"type": "TIMER", "seconds": 3600},
}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["cancel the parent's open children", "cancel the child"])
def test_a_step_commit_in_flight_during_a_cancel_leaves_no_step_open(how):
    """A drain commits a child's step — and with it the child's next step — while a cancel
    waits for that step's lock. The cancel's statement cannot see the next step (it was
    inserted after the statement's snapshot), yet it must not leave it open: an open step of
    a CANCELLED execution runs (S18), and a failFast retry would not re-run it (S28: it re-runs
    a cancelled child's CANCELLED steps)."""
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", TWO_STEPS)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [{"n": 1}]})
    [spawner] = helpers.claim_runs()
    helpers.commit([(spawner, engine.execute(spawner))])
    [run] = [run for run in helpers.claim_runs() if run.vertex.id == "first"]
    outcome = engine.execute(run)
    child = Execution.objects.get(parent=parent)
    holding, go = threading.Event(), threading.Event()
    outcome_of: dict[str, object] = {}

    def commit_and_hold() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            engine.commit(cursor, [(run, outcome)])
            holding.set()
            assert go.wait(60)

    def cancel() -> object:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            outcome_of["pid"] = cursor.fetchone()[0]
        if how == "cancel the child":
            return services.cancel_execution(child, actor="op")
        return services.cancel_open_children(helpers.refresh(parent), actor="op")

    committer = helpers.in_thread(outcome_of, "commit", commit_and_hold)
    assert holding.wait(30), "the step's commit never ran"
    canceller = helpers.in_thread(outcome_of, "cancel", cancel)
    wait_for(lambda: "pid" in outcome_of and helpers.waiting_for_a_lock(outcome_of["pid"]), timeout=30,
             what="the cancel to wait for the step's commit")
    go.set()
    for thread in (committer, canceller):
        thread.join(60)
        assert not thread.is_alive()
    assert outcome_of["cancel"] == 1, outcome_of
    assert helpers.refresh(child).status == "CANCELLED"
    assert dict(Step.objects.filter(execution=child).values_list("vertex", "status")) == \
        {"first": "SUCCEEDED", "second": "CANCELLED"}, "the step the commit created is cancelled too"
    assert descendants_left_to_run(parent) == (0, 0)
