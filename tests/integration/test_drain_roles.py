"""Drain roles (S11, issue 14 §6): with more than one drain alive, the drain of the lowest
live slot calls destinations first, the others take plain steps first and abstain from
destinations while they run them — their share of each limit goes to the drains that call.
What each drain claims is decided by executions/worker/policy.py (tested table-driven in
tests/unit/test_claim_policy.py); here: the roles read from the live drain slots, the
abstain lock, and the budget SQL that divides a limit by them."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from executions import kick
from executions.models import Step
from executions.worker import Drain, roles
from executions.worker.roles import Roles
from tests.support import factories, handlers, helpers

pytestmark = pytest.mark.django_db

OTHER_DRAINS = "SELECT pg_advisory_lock(%s, %s)"

ABSTAINING = """
    SELECT objid::int FROM pg_locks
    WHERE locktype = 'advisory' AND classid = %s AND objsubid = 2 AND granted
"""


@pytest.fixture
def live_slots():
    """Drain slots held as if their drains were alive (a session of its own)."""
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        def hold(*slots: int) -> None:
            for slot in slots:
                other.execute(OTHER_DRAINS, [kick.ADVISORY_CLASS, slot])

        yield hold
        other.execute("SELECT pg_advisory_unlock_all()")


def abstaining() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(ABSTAINING, [roles.ABSTAIN_CLASS])
        return {row[0] for row in cursor.fetchall()}


def test_roles_follow_the_live_drain_slots(live_slots):
    """Which drain calls is read from the drain slots held (pg_locks); the decision itself is
    policy.role_of (tests/unit/test_claim_policy.py)."""
    assert Roles(0).current() == "both", "no other drain alive"
    live_slots(0, 1)
    assert Roles(0).current() == "calls", "the lowest live slot calls destinations first"
    assert Roles(1).current() == "plain"
    assert Roles(None).current() == "both", "a drain outside a slot (a test, a command) does both"


def test_an_abstaining_drain_holds_its_lock_in_its_slot_until_it_stops(live_slots):
    live_slots(0, 1)
    roles = Roles(1)
    roles.abstain(True)
    roles.abstain(True)  # held already: nothing more
    assert abstaining() == {1}
    roles.abstain(False)
    assert abstaining() == set()


def test_a_drain_that_ends_stops_abstaining(live_slots):
    live_slots(0, 1)
    drain = Drain(threads=0, batch=10, slot=1, max_seconds=0)  # out of time: it claims nothing and ends
    drain.roles.abstain(True)
    assert abstaining() == {1}
    drain.run()
    assert abstaining() == set()


def test_an_abstaining_drain_leaves_its_share_of_a_limit_to_the_others(workspace, live_slots):
    api = helpers.waiting_calls(workspace, 20, concurrency_limit=7)
    live_slots(0, 1)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute(OTHER_DRAINS, [roles.ABSTAIN_CLASS, 1])
        assert len(helpers.claim(100)) == 7, "one of two drains calls: the whole limit is its share"
    assert Step.objects.filter(destination=api, status="RUNNING").count() == 7


def test_a_claim_tells_the_caller_its_share_while_ready_steps_wait(workspace, live_slots):
    api = helpers.waiting_calls(workspace, 8, concurrency_limit=7)
    live_slots(0, 1)
    shares: dict[int, int | None] = {}
    assert len(helpers.claim(3, shares=shares)) == 3
    assert shares == {api.pk: 4}, "ceil(7 / 2) while READY steps wait"
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute(OTHER_DRAINS, [roles.ABSTAIN_CLASS, 1])
        helpers.claim(3, shares=shares)
    assert shares == {api.pk: 7}, "the other drain abstains: the whole limit"
    assert len(helpers.claim(100, queue=True, shares=shares)) == 2, "one slot left, one step queued"
    assert shares == {api.pk: None}, "no READY step left to wait: no share to keep to"


@pytest.mark.django_db(transaction=True)
def test_a_drain_of_the_plain_role_abstains_while_it_runs_plain_steps_and_stops_when_it_ends(transactional_db,
                                                                                            live_slots):
    """End to end: the decision (policy.decide), the role (roles.Roles) and the lock, as a
    drain in slot 1 beside a drain in slot 0 runs plain steps that stay in flight."""
    workspace = factories.default_workspace()
    helpers.publish(workspace, "held", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.hold"}}})
    for i in range(3):
        helpers.start(workspace, "held", {"i": i})
    live_slots(0, 1)
    gate = handlers.hold_gate.reset()

    def run() -> None:
        try:
            Drain(threads=4, batch=10, slot=1, idle_seconds=0, linger=False).run()
        finally:
            connection.close()  # this thread's own

    drain = threading.Thread(target=run)
    drain.start()
    try:
        assert gate.started.wait(20)
        deadline = time.monotonic() + 20
        while abstaining() != {1}:  # its next claim, with three plain steps in flight
            assert time.monotonic() < deadline, "the drain never abstained"
            time.sleep(0.05)
    finally:
        gate.release.set()
        drain.join(timeout=30)
    assert not drain.is_alive()
    assert abstaining() == set(), "an ended drain abstains no more"
