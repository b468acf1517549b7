"""What a drain claims next (executions.worker.policy): a pure function of plain values, so
every rule is a row here — no database, no clock, no drain."""

from __future__ import annotations

import pytest

from executions.worker.policy import ABSTAIN_LINGER, CLAIM_RETRY, DrainView, decide, role_of

NOW = 1_000.0
LONG_AGO = NOW - 60


def view(**values: object) -> DrainView:
    base: dict[str, object] = {"now": NOW, "batch": 10, "bound_cap": 20, "plain_in_flight": 0,
                               "bound_in_flight": 0, "role": "both"}
    return DrainView(**{**base, **values})  # type: ignore[arg-type]


@pytest.mark.parametrize(("values", "plain", "bound", "abstain"), [
    # A drain alone does both kinds, as far as its batch and its cap go.
    ({}, 10, 20, False),
    ({"plain_in_flight": 4, "bound_in_flight": 5}, 6, 15, False),
    # Plain steps are claimed in batches: under a quarter of the batch free, none.
    ({"plain_in_flight": 9}, 0, 20, False),
    ({"plain_in_flight": 7}, 3, 20, False),
    ({"batch": 2, "plain_in_flight": 1}, 1, 20, False),
    ({"bound_in_flight": 20}, 10, 0, False),
    # The drain that calls (the lowest live slot): no plain step while a call is in flight...
    ({"role": "calls"}, 10, 20, False),
    ({"role": "calls", "bound_in_flight": 5}, 0, 15, False),
    # ... and plain steps again once none is (neither kind starves).
    ({"role": "calls", "plain_in_flight": 3}, 7, 20, False),
    # Another drain: no destination step while ABSTAIN_PLAIN plain steps or more run...
    ({"role": "plain", "plain_in_flight": 5}, 5, 0, True),
    # ... nor for ABSTAIN_LINGER after (a gap between two batches of a backlog) ...
    ({"role": "plain", "plain_seen_at": NOW - ABSTAIN_LINGER / 2}, 10, 0, True),
    # ... then destinations too.
    ({"role": "plain", "plain_seen_at": NOW - ABSTAIN_LINGER * 2}, 10, 20, False),
    # A single plain step in flight (a spawner between its batches, a timer) does not make it abstain.
    ({"role": "plain", "plain_in_flight": 1}, 9, 20, False),
    # Only the plain role abstains.
    ({"role": "calls", "plain_in_flight": 5, "plain_seen_at": NOW}, 5, 20, False),
    ({"role": "both", "plain_in_flight": 5}, 5, 20, False),
    # A step that may kill its worker runs alone; the role's abstention still holds meanwhile.
    ({"suspect": True}, 0, 0, False),
    ({"suspect": True, "role": "plain", "plain_in_flight": 3}, 0, 0, True),
])
def test_rooms_per_kind_and_roles(values, plain, bound, abstain):
    claim = decide(view(**values))
    assert (claim.plain, claim.bound, claim.abstain) == (plain, bound, abstain)
    assert claim.room == plain + bound


@pytest.mark.parametrize(("values", "looks"), [
    ({}, True),
    # The last claim found no destination step: not again until a commit frees a slot or CLAIM_RETRY.
    ({"bound_retry_at": NOW + 0.1}, False),
    ({"bound_retry_at": NOW}, True),
    # Every gate has a queue of at least one step per slot (QUEUE_DEPTH / 2 each): it will
    # not run dry before the next turn — but it still looks every CLAIM_RETRY.
    ({"queues": [(4, 4), (2, 2)], "queue_depth": 2, "bound_claimed_at": NOW - CLAIM_RETRY / 2}, False),
    ({"queues": [(4, 4), (2, 2)], "queue_depth": 2, "bound_claimed_at": NOW - CLAIM_RETRY * 2}, True),
    ({"queues": [(4, 4), (1, 2)], "queue_depth": 2, "bound_claimed_at": NOW - CLAIM_RETRY / 2}, True),
    # A gate that holds no slot (only queued steps) is not saturated.
    ({"queues": [(3, 0)], "queue_depth": 2, "bound_claimed_at": NOW - CLAIM_RETRY / 2}, True),
])
def test_when_a_drain_looks_for_destination_steps(values, looks):
    claim = decide(view(**values))
    assert (claim.bound > 0) is looks
    assert claim.bound_claimed_at == (NOW if looks else values.get("bound_claimed_at", float("-inf")))


def test_the_time_plain_work_was_last_seen_is_carried_to_the_next_decision():
    busy = decide(view(role="plain", plain_in_flight=2, plain_seen_at=LONG_AGO))
    assert busy.plain_seen_at == NOW
    assert decide(view(role="plain", plain_in_flight=1, plain_seen_at=LONG_AGO)).plain_seen_at == LONG_AGO
    later = decide(view(role="plain", now=NOW + ABSTAIN_LINGER / 2, plain_seen_at=busy.plain_seen_at))
    assert later.abstain, "still within ABSTAIN_LINGER of the plain work"


@pytest.mark.parametrize(("slot", "live", "role"), [
    (None, {0, 1}, "both"),  # outside a drain slot (a test, a command)
    (0, set(), "both"),
    (0, {0}, "both"),
    (0, {0, 1}, "calls"),
    (1, {0, 1}, "plain"),
    (2, {0, 1}, "plain"),  # its own slot counts, even before pg_locks shows it
    (1, {1, 3}, "calls"),
])
def test_the_role_of_a_drain_among_the_live_ones(slot, live, role):
    assert role_of(slot, live) == role
