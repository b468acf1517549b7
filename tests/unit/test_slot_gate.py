"""worker.SlotGate: a drain's slots at one destination and the steps queued for them (S11)."""

from __future__ import annotations

import time
from collections.abc import Callable

from executions.worker import SlotGate


def gate_with(started: list[int]) -> tuple[SlotGate, Callable[..., None]]:
    gate = SlotGate()
    gate.renewed(time.monotonic() + 60)

    def step(n: int, *, holds_slot: bool) -> None:
        gate.submit(lambda: started.append(n), holds_slot=holds_slot)

    return gate, step


def test_a_step_starts_only_in_a_free_slot_and_the_next_takes_a_slot_when_a_call_ends():
    started: list[int] = []
    gate, step = gate_with(started)
    step(1, holds_slot=True)
    step(2, holds_slot=True)
    step(3, holds_slot=False)
    step(4, holds_slot=False)
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
