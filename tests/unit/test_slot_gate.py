"""gates.SlotGate: a drain's slots at one destination and the steps queued for them (S11)."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace

from executions.worker import handover
from executions.worker.copies import Copy
from executions.worker.gates import SlotGate
from executions.worker.inflight import InFlight


def a_copy(version: int = 1, *, lasting: float = 60.0) -> Copy:
    """A copy of the destination's settings, fresh for ``lasting`` seconds."""
    return Copy({"id": 7, "base_url": f"http://v{version}.example", "config_version": version},
                time.monotonic() + lasting)


def gate_with(started: list[int]) -> tuple[SlotGate, Callable[..., None]]:
    gate = SlotGate()
    gate.renewed(time.monotonic() + 60)
    gate.configure(a_copy())

    def step(n: int, *, holds_slot: bool) -> None:
        gate.submit(lambda: started.append(n), holds_slot=holds_slot)

    return gate, step


def two_slots_two_queued(started: list[int]) -> SlotGate:
    """Steps 1 and 2 claimed into slots, 3 and 4 queued behind them."""
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=True)
    step(3, holds_slot=False)
    step(4, holds_slot=False)
    return gate


def test_a_step_starts_only_in_a_free_slot_and_the_next_takes_a_slot_when_a_call_ends():
    started: list[int] = []
    gate = two_slots_two_queued(started)
    assert started == [1, 2], "two slots: two calls; the queued steps wait"
    assert (gate.slots, gate.active) == (2, 2)
    gate.release()  # call 1 ended: its slot goes to the first queued step at once
    assert started == [1, 2, 3]
    gate.release()
    gate.release()
    assert started == [1, 2, 3, 4]
    gate.release()
    assert (gate.slots, gate.active) == (2, 0)


def test_slots_given_up_or_taken_over_change_what_may_start():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=False)
    gate.resize(-1)  # step 1 is being committed and nobody took its slot over
    gate.release()  # ... and its call has ended
    assert started == [1], "no slot left: the queued step waits"
    gate.resize(1)  # a new slot was claimed
    assert started == [1, 2]


def test_nothing_starts_while_the_drains_leases_may_have_lapsed():
    started: list[int] = []
    gate = SlotGate()
    gate.configure(a_copy())
    gate.submit(lambda: started.append(1), holds_slot=True)
    assert started == [], "leases never confirmed: the slot may already be someone else's"
    gate.renewed(time.monotonic() + 60)
    assert started == [1]
    gate.valid_until = time.monotonic() - 1  # the heartbeat is late
    gate.submit(lambda: started.append(2), holds_slot=True)
    gate.release()
    gate.submit(lambda: started.append(3), holds_slot=False)
    assert started == [1], "a late heartbeat starts nothing"
    gate.renewed(time.monotonic() + 60)
    assert started == [1, 2, 3]


# --- the drain's side: slots handed over in a commit (handover.hand_over, handover.taken_over) ---------

def _entry(step_id: int, gate: SlotGate, *, holds_slot: bool, admitted: float = 0.0) -> InFlight:
    claimed = SimpleNamespace(destination_id=7, lease=(step_id, f"token-{step_id}"), holds_slot=holds_slot)
    entry = InFlight(run=SimpleNamespace(step_id=step_id, claimed=claimed), holds_slot=holds_slot)  # type: ignore[arg-type]
    entry.gate, entry.admitted = gate, admitted
    return entry


def test_a_call_that_ends_while_the_drain_commits_starts_the_next_queued_step_at_once():
    """Two slots. Step 1's call ended and step 3 started in its slot; while the drain commits
    step 1 (handing its slot to step 3), step 2's call ends: step 4, queued, must start in
    step 2's slot then and there — not wait for the commit to finish."""
    started: list[int] = []
    gate = two_slots_two_queued(started)
    gate.release()  # call 1 ended: step 3 runs in its slot
    assert started == [1, 2, 3]
    finished = _entry(1, gate, holds_slot=True, admitted=1.0)
    taker = _entry(3, gate, holds_slot=False, admitted=2.0)
    in_flight = [_entry(2, gate, holds_slot=True, admitted=1.0), taker, _entry(4, gate, holds_slot=False)]
    takers = handover.hand_over([finished], in_flight)
    assert takers == [taker], "the queued step running in step 1's slot takes it over"
    gate.release()  # call 2 ends during the commit
    assert started == [1, 2, 3, 4], "the slot of the ended call went to the queued step at once"
    handover.taken_over(takers, {3})  # the commit granted it
    assert taker.holds_slot, "step 3 took step 1's slot over in the commit"
    assert (gate.slots, gate.active) == (2, 2)


def test_a_slot_the_commit_does_not_hand_over_is_taken_back_from_the_gate():
    """The limit was lowered meanwhile: the database refuses the take-over, so the gate counts
    one slot less, and nothing more starts until the calls running in it end."""
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=False)
    step(3, holds_slot=False)
    gate.release()  # call 1 ended: step 2 runs in its slot
    finished = _entry(1, gate, holds_slot=True, admitted=1.0)
    taker = _entry(2, gate, holds_slot=False, admitted=2.0)
    takers = handover.hand_over([finished], [taker, _entry(3, gate, holds_slot=False)])
    handover.taken_over(takers, set())  # the commit granted nothing
    assert not taker.holds_slot
    assert (gate.slots, gate.active) == (0, 1), "step 2 runs on; the gate holds no slot"
    gate.release()
    assert started == [1, 2], "step 3 waits for a slot the database grants"


def test_a_finished_step_nobody_took_over_gives_its_slot_up_before_the_commit():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    gate.release()  # call 1 ended; nothing queued
    finished = _entry(1, gate, holds_slot=True, admitted=1.0)
    assert handover.hand_over([finished], []) == []
    assert gate.slots == 0, "the gate stopped counting the slot before the database gave it up"
    step(2, holds_slot=False)
    assert started == [1], "a step queued afterwards waits for a slot"


def test_queued_steps_a_claim_promoted_into_free_slots_start_in_them():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=False)
    queued = _entry(1, gate, holds_slot=False)
    assert started == [], "queued: no slot of its own yet"
    handover.promoted([queued])
    assert queued.holds_slot
    assert started == [1]


def test_a_gate_above_its_share_starts_nothing_until_it_is_back_under_it():
    """A drain that took a share left to it (another drain abstained) gives the surplus back
    as its calls end once the others call again: no queued step starts while ``share`` calls
    run, so the finished steps' slots are given up at their commit instead of handed over."""
    started: list[int] = []
    gate, step = gate_with(started)
    for n in (1, 2, 3):
        step(n, holds_slot=True)
    step(4, holds_slot=False)
    step(5, holds_slot=False)
    assert started == [1, 2, 3]
    gate.limit_to(2)
    gate.release()  # call 1 ended: two calls still run, the share
    assert started == [1, 2, 3], "at its share: the slot is not used again"
    gate.release()  # call 2 ended: one call runs
    assert started == [1, 2, 3, 4], "under its share: the next queued step starts"
    gate.limit_to(None)  # no READY step waits any more: every slot it holds may be used
    assert started == [1, 2, 3, 4, 5]


# --- the copy of the destination's settings a step starts with (copies.py) ----------------------------

def test_a_step_starts_only_while_the_gates_copy_of_the_settings_is_fresh():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=False)
    gate.configure(a_copy(lasting=-1))  # neither read nor confirmed for COPY_SECONDS
    gate.release()  # call 1 ended: its slot is free
    assert started == [1], "a lapsed copy starts nothing: a change may have replaced it"
    assert gate.waiting_for_copy(), "the drain is asked to read it again"
    gate.configure(a_copy(2))
    assert started == [1, 2]
    assert gate.copy is not None and gate.copy.version == 2
    assert not gate.waiting_for_copy()


def test_a_confirmation_of_the_same_version_keeps_a_copy_and_a_newer_version_retires_it():
    started: list[int] = []
    gate, step = gate_with(started)
    gate.configure(a_copy(1, lasting=-1))
    step(1, holds_slot=True)
    assert started == []
    gate.confirm(1, time.monotonic())  # a commit's take-over found version 1 just now
    assert started == [1]
    gate.confirm(2, time.monotonic())  # the settings changed since the copy was read
    step(2, holds_slot=False)
    gate.release()
    assert started == [1], "an old copy starts nothing, however recently its destination was seen"
    assert gate.waiting_for_copy()


def test_without_room_a_lapsed_copy_is_not_read_again():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=False)
    gate.configure(a_copy(lasting=-1))
    assert not gate.waiting_for_copy(), "step 2 waits for a slot anyway: no statement for it now"
