"""The engine's guards against lost workers, on real PostgreSQL without a cluster: steps
that run no user code survive a lost lease, a step that may have killed its worker runs
alone, and a run whose lease was taken over is fenced off on the record."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from executions.core import retry
from executions.engine import runner as engine
from executions.models import Destination, Event, Step
from executions.worker import Drain
from tests.support import factories, handlers, helpers

pytestmark = [pytest.mark.fault, pytest.mark.django_db, pytest.mark.timeout(60)]

ONE_ATTEMPT = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop", "retry": {"maxAttempts": 1}}}}


def make_suspect(step: Step) -> None:
    """A step on its last attempt that already lost a lease once."""
    Step.objects.filter(pk=step.pk).update(lease_expiries=1, attempt=1, max_attempts=1)


def test_a_step_without_a_retry_policy_survives_a_lost_worker(workspace):
    doc = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 0, "next": "done"},
                                         "done": {"type": "SUCCEED"}}}
    helpers.publish(workspace, "timer", doc)
    execution = helpers.start(workspace, "timer", {})
    [first] = helpers.claim()
    assert (first.vertex, first.max_attempts) == ("wait", retry.INTERNAL_MAX_ATTEMPTS)
    helpers.lose_leases()
    step = helpers.step(execution, "wait")
    assert (step.status, step.attempt, step.lease_expiries) == ("READY", 2, 1)
    assert helpers.refresh(execution).status == "PENDING", "a lost worker fails nothing (nor was it seen running)"
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"


def test_a_suspect_is_claimed_alone_and_only_by_a_drain_with_nothing_in_flight(workspace):
    helpers.publish(workspace, "one", ONE_ATTEMPT)
    executions = [helpers.start(workspace, "one", {"i": i}) for i in range(3)]
    suspect = helpers.step(executions[1], "t")
    make_suspect(suspect)

    assert helpers.claim(alone=False) == [], \
        "a busy drain leaves a waiting suspect to a free one, and takes nothing past it"
    [alone] = helpers.claim(alone=True)
    assert alone.step_id == suspect.pk and alone.suspect
    others = helpers.claim(alone=False)
    assert sorted(c.step_id for c in others) == sorted(helpers.step(e, "t").pk for e in (executions[0], executions[2]))
    assert not any(c.suspect for c in others)


def test_a_suspect_blocks_destination_claims_of_a_busy_drain_too(workspace):
    Destination.objects.create(workspace=workspace, name="api", base_url="http://api.invalid", concurrency_limit=5)
    with_destination = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop", "destination": "api"}}}
    helpers.publish(workspace, "one", ONE_ATTEMPT)
    helpers.publish(workspace, "calls", with_destination)
    make_suspect(helpers.step(helpers.start(workspace, "one", {}), "t"))
    helpers.start(workspace, "calls", {})
    assert helpers.claim(alone=False) == []
    [suspect] = helpers.claim(alone=True)
    assert suspect.suspect and suspect.destination_id is None
    [call] = helpers.claim(alone=False)
    assert call.destination_id is not None


def test_a_poison_pill_takes_no_innocent_step_down_with_it(workspace):
    """The poisoned step's batch-mates lose their leases with it, but each runs alone on its
    last attempt, so they succeed while the poison fails ("lease expired N times")."""
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.crash_if", "retry": {"maxAttempts": 3}}}}
    helpers.publish(workspace, "work", doc)
    poison = helpers.start(workspace, "work", {"crash": True})
    innocents = [helpers.start(workspace, "work", {"i": i}) for i in range(3)]
    for _ in range(2):  # two attempts, each killing the worker that ran the whole batch with it
        assert len(helpers.claim()) == 4
        helpers.lose_leases()
    for _ in range(4):  # last attempts: one step per claim
        [run] = helpers.claim()
        if run.execution_id == poison.pk:
            helpers.lose_leases()  # it kills its worker again, alone
        else:
            with transaction.atomic(), connection.cursor() as cursor:
                [loaded] = engine.load_runs(cursor, [run])
            with transaction.atomic(), connection.cursor() as cursor:
                assert engine.commit(cursor, [(loaded, engine.execute(loaded))]) == []
    assert helpers.refresh(poison).status == "FAILED"
    assert helpers.step(poison, "t").error.startswith("lease expired 3 times")
    assert [helpers.refresh(e).status for e in innocents] == ["SUCCEEDED"] * 3


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_lease_was_taken_over_is_fenced_off_on_the_record(transactional_db, settings):
    settings.SB = {**settings.SB, "LEASE_SECONDS": 3.0}  # the drain's heartbeat: every second
    workspace = factories.default_workspace()
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.hold"}}}
    helpers.publish(workspace, "slow", doc)
    execution = helpers.start(workspace, "slow", {})
    gate = handlers.hold_gate.reset()
    finished: list[int] = []

    def run() -> None:
        try:
            finished.append(Drain(threads=1, batch=4, idle_seconds=0, linger=False).run())
        finally:
            connection.close()  # this thread's own

    drain = threading.Thread(target=run)
    drain.start()
    try:
        assert gate.started.wait(20), "the drain claimed and started the step"
        with connection.cursor() as cursor:  # another worker took the step over (it re-runs it)
            cursor.execute("UPDATE executions_step SET lease_token = gen_random_uuid(), "
                           "lease_expires_at = now() + interval '1 hour' WHERE status = 'RUNNING'")
        notes = Event.objects.filter(execution_id=execution.pk, from_status="", message__startswith="discarded")
        deadline = time.monotonic() + 20
        while not notes.exists():  # the drain's next heartbeat finds the lease gone
            assert time.monotonic() < deadline, "the run was never fenced off"
            time.sleep(0.05)
    finally:
        gate.release.set()
        drain.join(timeout=20)
    assert not drain.is_alive(), "with nothing left in flight, the drain ends"
    assert finished == [0], "the late result is never committed"
    assert notes.count() == 1
    step = helpers.step(execution, "t")
    assert step.status == "RUNNING", "the step belongs to the worker that took it over"
