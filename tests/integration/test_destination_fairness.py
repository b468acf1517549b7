"""Destination fairness and slot use (S11): plain steps and destination-bound steps share each
claim, and a drain holds a destination slot only for a step it runs at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from executions import kick
from executions.core import leases, payloads
from executions.models import Destination, Step
from executions.worker import Drain
from tests.support import handlers as test_handlers
from tests.support import helpers
from tests.support.httpserver import serve

NOOP = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.noop"}}}


@pytest.mark.django_db
def test_a_plain_backlog_does_not_starve_destination_steps(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=10)
    helpers.publish(workspace, "plain", NOOP)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for i in range(40):
        helpers.start(workspace, "plain", {"i": i})
    for i in range(6):
        helpers.start(workspace, "call", {"i": i})
    helpers.make_due()

    claimed = helpers.claim(10)
    bound = [c for c in claimed if c.destination_id == api.pk]
    assert len(claimed) == 10
    assert len(bound) == 5, "half of the claim's room goes to destination steps when both kinds wait"
    assert len(claimed) - len(bound) == 5, "and the other half to plain steps"

    again = helpers.claim(10)
    assert sum(c.destination_id == api.pk for c in again) == 1, "the one HTTP step left comes next"
    assert len(again) == 10, "room the destinations cannot use goes to plain steps"


@pytest.mark.django_db
def test_a_claim_takes_no_more_destination_steps_than_the_caller_can_start(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=50)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for i in range(20):
        helpers.start(workspace, "call", {"i": i})
    assert len(helpers.claim(100, destination_limit=3)) == 3
    assert Step.objects.filter(destination=api, status="RUNNING").count() == 3
    assert len(helpers.claim(100, destination_limit=0)) == 0


def drain_sampling(sample: Callable[[], tuple[int, int]], every: float) -> list[tuple[int, int]]:
    """Run a drain with threads until nothing is claimable, calling ``sample`` meanwhile."""
    samples: list[tuple[int, int]] = []
    drain = threading.Thread(target=lambda: (Drain(max_seconds=30, idle_seconds=0, threads=2, batch=16,
                                                   linger=False).run(), connection.close()))
    drain.start()
    try:
        deadline = time.monotonic() + 20
        while drain.is_alive() and time.monotonic() < deadline:
            samples.append(sample())
            time.sleep(every)
    finally:
        drain.join(30)
    return samples


@pytest.mark.django_db(transaction=True)
def test_a_drain_runs_every_destination_step_it_holds(workspace):
    """Fewer threads than claimed HTTP steps: each held slot is a call in flight at the server."""
    with serve() as (url, recorder):
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=10,
                                         concurrency_limit=50)
        helpers.publish(workspace, "call", helpers.http_doc("api", "/slow/0.6"))
        for i in range(12):
            helpers.start(workspace, "call", {"i": i})
        samples = drain_sampling(
            lambda: (Step.objects.filter(destination=api, status="RUNNING").count(), recorder.in_flight), 0.05)
    assert len(recorder.requests) == 12
    assert recorder.peak == 12, f"all 12 held slots should be calls in flight at once; at most {recorder.peak} were"
    assert max(held for held, _ in samples) <= 12
    assert Step.objects.filter(destination=api, status="SUCCEEDED").count() == 12


@pytest.mark.django_db(transaction=True)
def test_a_queued_step_starts_in_the_slot_of_a_call_that_ended_without_a_claim(workspace, monkeypatch):
    """A drain claims a queue as deep as its slots; when a call ends, the next queued step
    starts in its slot at once and the commit hands the slot over (leases.take_over_slots).
    The limit holds at the server and in the database throughout."""
    taken: list[int] = []
    real_take_over = leases.take_over_slots

    def take_over(cursor: Any, leases_: Any, versions: Any = None, blocked: Any = None) -> set[int]:
        ids = real_take_over(cursor, leases_, versions, blocked)
        taken.extend(ids)
        return ids

    monkeypatch.setattr(leases, "take_over_slots", take_over)
    with serve() as (url, recorder):
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=10,
                                         concurrency_limit=2)
        helpers.publish(workspace, "call", helpers.http_doc("api", "/slow/0.15"))
        for i in range(10):
            helpers.start(workspace, "call", {"i": i})
        running = Step.objects.filter(destination=api, status="RUNNING")
        samples = drain_sampling(
            lambda: (running.filter(holds_slot=True).count(), running.filter(holds_slot=False).count()), 0.02)
    assert Step.objects.filter(destination=api, status="SUCCEEDED").count() == 10
    assert recorder.peak == 2, f"the limit is 2 calls at once, {recorder.peak} were seen"
    assert max(held for held, _ in samples) <= 2, "never more slots held than the limit"
    assert max(queued for _, queued in samples) >= 1, "steps waited in the drain's queue"
    assert taken, "queued steps took over the slots of finished calls"


@pytest.mark.django_db
def test_each_live_drain_claims_at_most_its_share_of_a_destination(workspace):
    """With two drains alive, one never takes every slot: the other one (and its database
    connection) gets its half, instead of only the slots freed between two of our claims."""
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=7)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for i in range(20):
        helpers.start(workspace, "call", {"i": i})
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        for slot in (0, 1):  # two drains hold their slots
            other.execute("SELECT pg_advisory_lock(%s, %s)", [kick.ADVISORY_CLASS, slot])
        assert len(helpers.claim(100)) == 4, "ceil(7 / 2) for this worker"
        assert helpers.claim(100) == [], "its share is used up"
        other.execute("SELECT pg_advisory_unlock_all()")
    assert len(helpers.claim(100)) == 3, "alone again: the rest of the limit"
    assert Step.objects.filter(destination=api, status="RUNNING").count() == 7


ASYNC_TASK = {"start": "wait", "vertices": {"wait": {"type": "TASK", "handler": "test.async_wait",
                                                      "input": {"seconds": "$.input.seconds", "fail": "$.input.fail"},
                                                      "retry": {"maxAttempts": 1}}}}


@pytest.mark.django_db(transaction=True)
def test_async_handlers_run_together_on_the_drains_loop_not_on_its_threads(workspace):
    helpers.publish(workspace, "async", ASYNC_TASK)
    started = [helpers.start(workspace, "async", {"seconds": 0.5, "fail": i == 0}) for i in range(12)]
    test_handlers.async_probe.__init__()
    drain = threading.Thread(target=lambda: (Drain(max_seconds=30, idle_seconds=0, threads=2, batch=16,
                                                   linger=False).run(), connection.close()))
    drain.start()
    drain.join(30)
    assert not drain.is_alive()
    assert test_handlers.async_probe.peak == 12, "all twelve wait at once with two threads"
    assert test_handlers.async_probe.threads == {"sb-step-loop"}
    assert [helpers.refresh(e).status for e in started] == ["FAILED"] + ["SUCCEEDED"] * 11
    assert helpers.step(started[0], "wait").error == "asked to fail"
    with connection.cursor() as cursor:
        output = payloads.load(cursor, [(started[1].pk, "wait")])[(started[1].pk, "wait")]
    assert output == {"waited": 0.5, "key": f"sb:{started[1].pk}:wait"}


@pytest.mark.django_db
def test_an_async_handler_also_runs_inline(workspace):
    helpers.publish(workspace, "async", ASYNC_TASK)
    execution = helpers.start(workspace, "async", {"seconds": 0.01, "fail": False})
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"


@pytest.mark.django_db(transaction=True)
def test_a_claim_holding_a_destination_does_not_stop_another_drains_commit(workspace):
    """A claim locks the destinations it serves for its whole transaction (claimers exclude
    each other), but another drain's commit only checks the foreign key of its call-log rows
    (a KEY SHARE lock, at COMMIT): that must not wait for the claim — with FOR UPDATE it did,
    and the two drains' turns ran one after the other (docs/performance-log.md, "Seventh pass")."""
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=4)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    helpers.start(workspace, "call", {})
    params = connection.get_connection_params()
    with psycopg.connect(**params) as claimer, psycopg.connect(**params) as committer:
        locked = claimer.execute(leases.LOCK_DESTINATIONS, {"worker": "test:1"}).fetchall()
        assert locked == [(api.pk,)], "the claim holds the destination (its transaction is open)"
        committer.execute("SET lock_timeout = '2s'")
        committer.execute("INSERT INTO executions_destinationcall (destination_id, step_id, ok, latency_ms, error, "
                          "created_at) VALUES (%s, NULL, true, 1.0, '', now())", [api.pk])
        committer.commit()  # the deferred foreign-key check runs here: no lock timeout
        with psycopg.connect(**params) as second_claimer:
            assert second_claimer.execute(leases.LOCK_DESTINATIONS, {"worker": "test:2"}).fetchall() == [], \
                "another claimer still skips the destination the first one holds"
        claimer.rollback()
