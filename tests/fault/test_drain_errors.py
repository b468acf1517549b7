"""The drain's error paths (issue 14 §5): every ``except`` says what happens to the work in
flight, and these tests prove it on real PostgreSQL.

* one step's result that the database refuses fails that step alone, with the reason;
* a deadlock or serialization failure at commit is retried: nothing is lost, no attempt used;
* a connection lost at commit is waited out and the results committed after reconnecting;
* an unexpected exception anywhere in the loop is logged and the drain goes on.
"""

from __future__ import annotations

import pytest
from django.db import DataError, OperationalError

from executions.core import leases
from executions.engine import runner as engine
from executions.models import Step
from executions.worker import Drain
from tests.support import factories, helpers

pytestmark = [pytest.mark.fault, pytest.mark.timeout(60)]

NOOP_ONCE = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop", "retry": {"maxAttempts": 1}}}}


def drain() -> int:
    return Drain(max_seconds=20, idle_seconds=0.0, threads=0, batch=64, linger=False).run()


def start_many(workspace, n: int) -> list:
    helpers.publish(workspace, "once", NOOP_ONCE)
    return [helpers.start(workspace, "once", {"i": i}) for i in range(n)]


def deadlock() -> OperationalError:
    import psycopg.errors

    error = OperationalError("deadlock detected")
    error.__cause__ = psycopg.errors.DeadlockDetected("deadlock detected")
    return error


@pytest.mark.django_db
def test_one_refused_result_fails_its_step_alone(workspace, monkeypatch):
    executions = start_many(workspace, 6)
    poisoned = helpers.step(executions[2], "t").pk
    real_apply = engine._apply

    def refuse_the_poisoned_step(cursor, groups):
        # Its result (a success) holds a value the database refuses; its failure does not.
        if any(run.step_id == poisoned for run, _ in groups.get("succeeded", [])):
            raise DataError("value out of range for this column")
        return real_apply(cursor, groups)

    monkeypatch.setattr(engine, "_apply", refuse_the_poisoned_step)
    drain()
    statuses = {e.pk: helpers.refresh(e).status for e in executions}
    assert statuses.pop(executions[2].pk) == "FAILED"
    assert set(statuses.values()) == {"SUCCEEDED"}, "the other results of the batch were committed"
    step = Step.objects.get(pk=poisoned)
    assert step.status == "FAILED" and "could not be recorded" in step.error and "out of range" in step.error


@pytest.mark.django_db
def test_a_deadlock_at_commit_is_retried_without_losing_an_attempt(workspace, monkeypatch):
    executions = start_many(workspace, 4)
    real_commit = engine.commit
    calls = {"n": 0}

    def deadlock_once(cursor, results, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise deadlock()
        return real_commit(cursor, results, **kwargs)

    monkeypatch.setattr(engine, "commit", deadlock_once)
    drain()
    assert calls["n"] >= 2
    for execution in executions:
        assert helpers.refresh(execution).status == "SUCCEEDED"
        assert helpers.step(execution, "t").attempt == 1, "a retried commit uses no attempt"


@pytest.mark.django_db(transaction=True)
def test_a_connection_lost_at_commit_is_waited_out_and_the_results_committed(monkeypatch):
    workspace = factories.default_workspace()
    executions = start_many(workspace, 4)
    real_commit = engine.commit
    calls = {"n": 0}

    def lose_the_connection_once(cursor, results, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real_commit(cursor, results, **kwargs)

    monkeypatch.setattr(engine, "commit", lose_the_connection_once)
    drain()
    assert calls["n"] >= 2
    for execution in executions:
        assert helpers.refresh(execution).status == "SUCCEEDED", "maxAttempts 1: a lost result would fail it"
        assert helpers.step(execution, "t").attempt == 1


@pytest.mark.django_db
def test_the_drain_survives_an_unexpected_exception(workspace, monkeypatch, caplog):
    executions = start_many(workspace, 3)
    real_claim = leases.claim
    calls = {"n": 0}

    def fail_once(cursor, limit, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("something nobody expected")
        return real_claim(cursor, limit, **kwargs)

    monkeypatch.setattr(leases, "claim", fail_once)
    drain()
    assert "something nobody expected" in caplog.text
    assert all(helpers.refresh(e).status == "SUCCEEDED" for e in executions)
