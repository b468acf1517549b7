"""Drain roles (S11, issue 14 §6): with more than one drain alive, calls to destinations and
plain work run in different processes — the drain of the lowest live slot calls
destinations first and takes plain steps only while it has no call in flight; the others
take plain steps first and destination steps only once they have had no plain step in flight
for a moment (``ABSTAIN_LINGER``).
So a call's answer never waits for an interpreter busy with plain handlers, and neither kind
starves: each has a drain that puts it first. A drain alone does both, as before."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import psycopg
import pytest
from django.db import connection

from executions import kick, worker
from executions.models import Destination, Step
from executions.worker import Drain
from tests.support import helpers

pytestmark = pytest.mark.django_db

NOOP = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.noop"}}}

OTHER_DRAINS = "SELECT pg_advisory_lock(%s, %s)"

ABSTAINING = """
    SELECT objid::int FROM pg_locks
    WHERE locktype = 'advisory' AND classid = %s AND objsubid = 2 AND granted
"""


@pytest.fixture
def backlog(workspace) -> Destination:
    """40 plain steps and 30 destination-bound steps, all due."""
    api = helpers.waiting_calls(workspace, 30, concurrency_limit=30)
    helpers.publish(workspace, "plain", NOOP)
    for i in range(40):
        helpers.start(workspace, "plain", {"i": i})
    helpers.make_due()
    return api


@pytest.fixture
def live_slots():
    """Drain slots held as if their drains were alive (a session of its own)."""
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        def hold(*slots: int) -> None:
            for slot in slots:
                other.execute(OTHER_DRAINS, [kick.ADVISORY_CLASS, slot])

        yield hold
        other.execute("SELECT pg_advisory_unlock_all()")


def holding_drain(slot: int | None, *, bound_cap: int) -> Drain:
    """A drain whose claimed steps stay in flight (they never run): its claims are what is
    under test. It claims up to 10 plain steps and ``bound_cap`` destination steps."""
    drain = Drain(threads=0, batch=10, slot=slot)
    drain.bound_cap = bound_cap

    def hold(entry: Any) -> None:
        drain.in_flight[Future()] = entry

    drain._start = hold  # type: ignore[method-assign]
    return drain


def claimed(drain: Drain, before: set[int]) -> tuple[int, int]:
    """(plain, bound) steps the drain claimed since ``before`` (step ids in flight then)."""
    new = [entry for entry in drain.in_flight.values() if entry.run.step_id not in before]
    return sum(not entry.bound for entry in new), sum(entry.bound for entry in new)


def in_flight(drain: Drain) -> set[int]:
    return {entry.run.step_id for entry in drain.in_flight.values()}


def forget(drain: Drain, *, bound: bool, keep: int = 0) -> None:
    """Steps of one kind finished but ``keep`` (their results do not matter here; their rows
    stay RUNNING, so a destination step's slot stays held)."""
    for future in [future for future, entry in drain.in_flight.items() if entry.bound == bound][keep:]:
        del drain.in_flight[future]


def abstaining() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(ABSTAINING, [kick.ABSTAIN_CLASS])
        return {row[0] for row in cursor.fetchall()}


def test_the_lowest_live_drain_takes_no_plain_step_while_its_calls_run(backlog, live_slots):
    live_slots(0, 1)
    drain = holding_drain(0, bound_cap=10)
    drain._claim_and_submit()
    assert claimed(drain, set()) == (10, 10), "nothing in flight yet: it takes both kinds"

    forget(drain, bound=False)
    forget(drain, bound=True, keep=5)
    before = in_flight(drain)
    drain._claim_and_submit()
    assert claimed(drain, before) == (0, 5), "calls in flight: destination steps only, plain room unused"

    forget(drain, bound=True)
    before = in_flight(drain)
    drain._claim_and_submit()
    plain, _ = claimed(drain, before)
    assert plain > 0, "no call in flight: plain steps again (neither kind starves)"


def test_another_drain_takes_no_destination_step_while_its_plain_steps_run(backlog, live_slots, monkeypatch):
    live_slots(0, 1)
    drain = holding_drain(1, bound_cap=4)
    drain._claim_and_submit()
    assert claimed(drain, set()) == (10, 4), "nothing in flight yet: it takes both kinds"
    assert abstaining() == set()

    forget(drain, bound=True)
    forget(drain, bound=False, keep=5)
    before = in_flight(drain)
    drain._claim_and_submit()
    assert claimed(drain, before) == (5, 0), "plain steps in flight: no destination step"
    assert abstaining() == {1}, "and its share of every destination goes to the drains that call"

    forget(drain, bound=False)
    before = in_flight(drain)
    drain._claim_and_submit()
    assert claimed(drain, before)[1] == 0, "plain steps ran a moment ago (a gap in a backlog): still none"
    assert abstaining() == {1}

    forget(drain, bound=False)
    monkeypatch.setattr(worker, "ABSTAIN_LINGER", 0.0)
    drain._claim_and_submit()
    _, bound = claimed(drain, set())
    assert bound > 0, "no plain step in flight for a while: it calls destinations too"
    assert abstaining() == set()


def test_a_single_plain_step_in_flight_does_not_make_a_drain_abstain(backlog, live_slots):
    """One plain step (a spawner between its batches, a timer) hardly slows a drain: it goes on
    calling, instead of leaving a large limit to a drain that cannot keep it busy alone."""
    live_slots(0, 1)
    drain = holding_drain(1, bound_cap=4)
    drain._claim_and_submit()
    forget(drain, bound=True)
    forget(drain, bound=False, keep=1)
    before = in_flight(drain)
    drain._claim_and_submit()
    _, bound = claimed(drain, before)
    assert bound == 4, "a lone plain step in flight: it still takes destination steps"
    assert abstaining() == set()


def test_a_drain_alone_takes_both_kinds_as_before(backlog, live_slots):
    live_slots(0)
    drain = holding_drain(0, bound_cap=20)
    drain._claim_and_submit()
    assert claimed(drain, set()) == (10, 20)
    forget(drain, bound=False)
    forget(drain, bound=True, keep=10)
    before = in_flight(drain)
    drain._claim_and_submit()
    assert claimed(drain, before) == (10, 10), "calls in flight, and plain steps too"


def test_a_drain_that_ends_stops_abstaining(backlog, live_slots):
    live_slots(0, 1)
    drain = holding_drain(1, bound_cap=4)
    drain._claim_and_submit()
    forget(drain, bound=True)
    forget(drain, bound=False, keep=5)
    drain._claim_and_submit()
    assert abstaining() == {1}
    drain.in_flight.clear()
    drain.max_seconds = 0  # out of time: it claims nothing more and ends
    drain.run()
    assert abstaining() == set()


def test_an_abstaining_drain_leaves_its_share_of_a_limit_to_the_others(workspace, live_slots):
    api = helpers.waiting_calls(workspace, 20, concurrency_limit=7)
    live_slots(0, 1)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute(OTHER_DRAINS, [kick.ABSTAIN_CLASS, 1])
        assert len(helpers.claim(100)) == 7, "one of two drains calls: the whole limit is its share"
    assert Step.objects.filter(destination=api, status="RUNNING").count() == 7


def test_a_claim_tells_the_caller_its_share_while_ready_steps_wait(workspace, live_slots):
    api = helpers.waiting_calls(workspace, 8, concurrency_limit=7)
    live_slots(0, 1)
    shares: dict[int, int | None] = {}
    assert len(helpers.claim(3, shares=shares)) == 3
    assert shares == {api.pk: 4}, "ceil(7 / 2) while READY steps wait"
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute(OTHER_DRAINS, [kick.ABSTAIN_CLASS, 1])
        helpers.claim(3, shares=shares)
    assert shares == {api.pk: 7}, "the other drain abstains: the whole limit"
    assert len(helpers.claim(100, queue=True, shares=shares)) == 2, "one slot left, one step queued"
    assert shares == {api.pk: None}, "no READY step left to wait: no share to keep to"
