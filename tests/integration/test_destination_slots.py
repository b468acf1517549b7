"""Per-destination concurrency limits (S11), decided by state, not by wall clock."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection, transaction

from executions import destinations, engine, kick, leases, outcomes
from executions.models import Destination, Step
from tests.support import helpers
from workflows.errors import Invalid

pytestmark = pytest.mark.django_db


def running(destination: Destination) -> int:
    return Step.objects.filter(destination=destination, status="RUNNING").count()


def test_no_more_steps_than_free_slots_are_claimed(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=3)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for _ in range(10):
        helpers.start(workspace, "call", {})
    first = helpers.claim()
    assert len(first) == 3 and {c.destination_id for c in first} == {api.pk}
    assert helpers.claim() == [], "a saturated destination's steps stay READY: waiting, not failed"
    waiting = Step.objects.filter(destination=api, status="READY")
    assert waiting.count() == 7 and set(waiting.values_list("attempt", flat=True)) == {1}

    with transaction.atomic(), connection.cursor() as cursor:  # one finishes: its slot frees
        [run] = engine.load_runs(cursor, [first[0]])
        engine.commit(cursor, [(run, outcomes.succeeded({"ok": True}))])
    assert len(helpers.claim()) == 1
    assert running(api) == 3


def test_raising_the_limit_takes_effect_at_the_next_claim(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=2)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for _ in range(10):
        helpers.start(workspace, "call", {})
    assert len(helpers.claim()) == 2
    destinations.update_destination(api, concurrency_limit=5)
    assert len(helpers.claim()) == 3
    destinations.update_destination(api, concurrency_limit=None)
    assert len(helpers.claim()) == 5, "empty means unlimited"


def test_a_limit_of_zero_pauses_a_destination(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=0)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    helpers.start(workspace, "call", {})
    assert helpers.claim() == []
    destinations.update_destination(api, concurrency_limit=1)
    assert len(helpers.claim()) == 1


def test_a_saturated_destination_never_blocks_other_work(workspace):
    slow = Destination.objects.create(workspace=workspace, name="slow", base_url="http://127.0.0.1:9",
                                      concurrency_limit=1)
    fast = Destination.objects.create(workspace=workspace, name="fast", base_url="http://127.0.0.1:9",
                                      concurrency_limit=10)
    helpers.publish(workspace, "slow-call", helpers.http_doc("slow"))
    helpers.publish(workspace, "fast-call", helpers.http_doc("fast"))
    helpers.publish(workspace, "noop", helpers.NOOP)
    for _ in range(20):
        helpers.start(workspace, "slow-call", {})
    assert len(helpers.claim()) == 1  # slow is now saturated, with 19 steps waiting for it
    for _ in range(5):
        helpers.start(workspace, "fast-call", {})
        helpers.start(workspace, "noop", {})
    claimed = helpers.claim()
    assert sorted(c.destination_id or 0 for c in claimed) == [0] * 5 + [fast.pk] * 5
    assert Step.objects.filter(destination=slow, status="READY").count() == 19


def test_a_lost_workers_slot_returns_when_its_lease_expires(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     concurrency_limit=2)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for _ in range(4):
        helpers.start(workspace, "call", {})
    assert len(helpers.claim()) == 2 and helpers.claim() == []
    with connection.cursor() as cursor:  # the worker holding both slots died
        cursor.execute("UPDATE executions_step SET lease_expires_at = now() - interval '1 second' "
                       "WHERE status = 'RUNNING'")
    assert engine.reap() == (2, 0)
    assert running(api) == 0
    assert len(helpers.claim()) == 2


def test_a_request_rate_limit_spends_tokens(workspace):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9",
                                     rate_per_second=2)
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    for _ in range(6):
        helpers.start(workspace, "call", {})
    with connection.cursor() as cursor:  # a full bucket after a long idle: burst = one second's worth
        cursor.execute("UPDATE executions_destination SET rate_tokens = 0, "
                       "rate_updated_at = now() - interval '1 hour' WHERE id = %s", [api.pk])
    assert len(helpers.claim()) == 2
    assert helpers.claim() == [], "the bucket is empty until time refills it"
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_destination SET rate_updated_at = rate_updated_at - interval '1 second' "
                       "WHERE id = %s", [api.pk])
    assert len(helpers.claim()) == 2


@pytest.mark.parametrize(("fields", "field"), [
    ({"concurrency_limit": -1}, "concurrency_limit"),
    ({"concurrency_limit": "3"}, "concurrency_limit"),
    ({"concurrency_limit": 2.5}, "concurrency_limit"),
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"base_url": "ftp://x"}, "base_url"),
    ({"rate_per_second": 0}, "rate_per_second"),
    ({"concurrency_limit": 2**40}, "concurrency_limit"),
    ({"base_url": "http://example.com/" + "x" * 500}, "base_url"),
    ({"name": "new-name"}, "name"),
])
def test_destination_edits_are_validated(workspace, fields, field):
    api = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9")
    with pytest.raises(Invalid) as raised:
        destinations.update_destination(api, **fields)
    assert [e["field"] for e in raised.value.errors] == [field]
    api.refresh_from_db()
    assert (api.concurrency_limit, api.timeout_seconds, api.base_url) == (None, 10.0, "http://127.0.0.1:9")


def holders(destination: Destination) -> int:
    return Step.objects.filter(destination=destination, status="RUNNING", holds_slot=True).count()


def test_a_queue_claim_takes_the_free_slots_and_a_queue_of_steps_without_one(workspace):
    queue = 3 * leases.QUEUE_DEPTH
    api = helpers.waiting_calls(workspace, 3 + queue + 2, concurrency_limit=3)
    first = helpers.claim(queue=True)
    assert sorted(c.holds_slot for c in first) == [False] * queue + [True] * 3
    assert holders(api) == 3, "only the slot holders count against the limit"
    assert helpers.claim(queue=True) == [], "slots full and a full queue behind them: nothing more"
    assert helpers.claim() == [], "a claim without a queue finds no free slot either"


def test_a_rate_limited_destination_gets_no_queue(workspace):
    # Its tokens are spent at claim: a queued step would call later than its token allows.
    api = helpers.waiting_calls(workspace, 10, concurrency_limit=3, rate_per_second=100)
    with connection.cursor() as cursor:  # a full bucket
        cursor.execute("UPDATE executions_destination SET rate_updated_at = now() - interval '1 hour' WHERE id = %s",
                       [api.pk])
    assert [c.holds_slot for c in helpers.claim(queue=True)] == [True] * 3


def test_a_queued_step_takes_over_the_slot_of_the_step_committed_with_it(workspace):
    api = helpers.waiting_calls(workspace, 6, concurrency_limit=2)
    claimed = helpers.claim(queue=True)
    holder = next(c for c in claimed if c.holds_slot)
    queued = [c for c in claimed if not c.holds_slot]
    stale = leases.Lease(queued[1].step_id, uuid.uuid4())  # not its lease: takes nothing
    with transaction.atomic(), connection.cursor() as cursor:
        [run] = engine.load_runs(cursor, [holder])
        engine.commit(cursor, [(run, outcomes.succeeded({"ok": True}))])
        taken = leases.take_over_slots(cursor, [queued[0].lease, stale])
    assert taken == {queued[0].step_id}
    assert holders(api) == 2, "the slot went from the finished step to the one that started in it"
    assert Step.objects.get(pk=queued[0].step_id).holds_slot
    assert not Step.objects.get(pk=queued[1].step_id).holds_slot


def test_a_lowered_limit_is_not_handed_over(workspace):
    """Queued steps take over finished steps' slots only up to the destination's limit, so a
    limit an operator lowers takes effect as calls end."""
    api = helpers.waiting_calls(workspace, 9, concurrency_limit=3)
    claimed = helpers.claim(queue=True)
    held = [c for c in claimed if c.holds_slot]
    queued = [c for c in claimed if not c.holds_slot]
    destinations.update_destination(api, concurrency_limit=2)
    with transaction.atomic(), connection.cursor() as cursor:
        runs = engine.load_runs(cursor, held[:2])
        engine.commit(cursor, [(run, outcomes.succeeded({"ok": True})) for run in runs])
        taken = leases.take_over_slots(cursor, [queued[0].lease, queued[1].lease])
    assert taken == {queued[0].step_id}, "two slots freed, but the new limit leaves room for one"
    assert holders(api) == 2


def test_free_slots_go_to_the_callers_queued_steps_first(workspace):
    """A raised limit (or slots another worker gave up) with no READY step left: the caller's
    queued steps take the free slots, instead of waiting for its few slots."""
    api = helpers.waiting_calls(workspace, 3, concurrency_limit=1)
    claimed = helpers.claim(queue=True)
    assert sorted(c.holds_slot for c in claimed) == [False, False, True], "every step claimed: none READY"
    destinations.update_destination(api, concurrency_limit=3)
    promoted: set[int] = set()
    assert helpers.claim(queue=True, promoted=promoted) == []
    assert promoted == {c.step_id for c in claimed if not c.holds_slot}
    assert holders(api) == 3


def test_queued_steps_take_free_slots_beyond_the_callers_share(workspace):
    """Another drain alive with nothing to claim (it stays up while leases run) halves this
    worker's share of a raised limit; its queued steps may still take every free slot, since
    no other drain has a step to put there (seen in CI: the Rate Limits browser test stuck at
    3 of 5 in flight)."""
    api = helpers.waiting_calls(workspace, 6, concurrency_limit=2)
    claimed = helpers.claim(queue=True)
    assert sorted(c.holds_slot for c in claimed) == [False] * 4 + [True] * 2
    destinations.update_destination(api, concurrency_limit=5)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        for slot in (0, 1):  # two drains alive: a share of ceil(5 / 2) = 3 each
            other.execute("SELECT pg_advisory_lock(%s, %s)", [kick.ADVISORY_CLASS, slot])
        promoted: set[int] = set()
        helpers.claim(queue=True, promoted=promoted)
        other.execute("SELECT pg_advisory_unlock_all()")
    assert len(promoted) == 3, "the limit, not the share, bounds what queued steps may take"
    assert holders(api) == 5


def test_queued_steps_take_no_more_than_the_share_while_ready_steps_wait(workspace):
    """Two drains alive and READY steps left: free slots beyond this worker's share are for
    the other drain to claim, not for this worker's queue (otherwise the first drain to claim
    after a start takes the whole limit and keeps it by handing slots over)."""
    api = helpers.waiting_calls(workspace, 4 * (1 + leases.QUEUE_DEPTH) + 10, concurrency_limit=2)
    claimed = helpers.claim(queue=True)
    assert sum(c.holds_slot for c in claimed) == 2
    destinations.update_destination(api, concurrency_limit=6)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        for slot in (0, 1):  # two drains alive: a share of ceil(6 / 2) = 3 each
            other.execute("SELECT pg_advisory_lock(%s, %s)", [kick.ADVISORY_CLASS, slot])
        promoted: set[int] = set()
        again = helpers.claim(queue=True, promoted=promoted)
        other.execute("SELECT pg_advisory_unlock_all()")
    assert sum(c.holds_slot for c in again) == 1, "one READY step takes the one slot left of the share"
    assert promoted == set(), "the other three free slots wait for the other drain"
    assert holders(api) == 3
    assert Step.objects.filter(destination=api, status="READY").exists()
