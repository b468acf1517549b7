"""The hand-over of the destination slots of a drain's committed steps (S11): a finished
step's slot goes, in the same commit, to a queued step that already started in it
(leases.take_over_slots), so the database never counts fewer slots than calls run, and the
gate never counts a slot the database no longer does."""

from __future__ import annotations

from collections.abc import Iterable

from executions.worker.gates import SlotGate
from executions.worker.inflight import InFlight


def hand_over(finished: Iterable[InFlight], in_flight: Iterable[InFlight]) -> list[InFlight]:
    """The slots of the destination steps about to be committed (``finished``): each goes to
    a queued step that already started in it (SlotGate) — the gate keeps counting it, so
    calls that end during the commit start queued steps at once — or is given up now, before
    the commit, so the drain never counts a slot the database no longer does. Returns the
    steps of ``in_flight`` that take a slot over in the commit (leases.take_over_slots);
    ``taken_over`` settles them once the commit said which it granted."""
    freed: dict[SlotGate, int] = {}
    held: dict[SlotGate, int] = {}  # of them, slots held back after a failed call (gates.py)
    for entry in finished:
        if entry.gate is not None and entry.holds_slot:
            freed[entry.gate] = freed.get(entry.gate, 0) + 1
        if entry.gate is not None and entry.held_back:
            held[entry.gate] = held.get(entry.gate, 0) + 1
            freed.setdefault(entry.gate, 0)
    if not freed:
        return []
    takers: list[InFlight] = []
    # In a slot since its gate admitted it (its task may not have begun yet).
    started = sorted((e for e in in_flight if e.admitted and not e.holds_slot and e.gate in freed),
                     key=lambda e: e.admitted)
    for gate, count in freed.items():
        taking = [e for e in started if e.gate is gate][:count]
        takers += taking
        if count > len(taking) or held.get(gate):
            gate.given_up(max(0, count - len(taking)), held.get(gate, 0))
    return takers


def taken_over(takers: Iterable[InFlight], granted: set[int]) -> None:
    """After the commit: the takers whose step id the database ``granted`` hold their slot;
    the gate of any other stops counting the slot ``hand_over`` kept for it."""
    for entry in takers:
        if entry.run.step_id in granted:
            entry.holds_slot = True
        elif entry.gate is not None:
            entry.gate.resize(-1)


def promoted(entries: Iterable[InFlight]) -> None:
    """Queued steps that took free slots (a claim's promotion): their gates gain them."""
    for entry in entries:
        entry.holds_slot = True
        if entry.gate is not None:
            entry.gate.resize(1)
