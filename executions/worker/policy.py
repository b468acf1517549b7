"""What a drain claims next: a pure function of plain values (no database, no clock).

The drain reads its state — what it has in flight, its role, its gates' queues, the time —
into a ``DrainView``; ``decide`` answers how many plain steps and how many destination-bound
steps to claim, and whether the drain abstains from destinations for now. The drain carries
the answer out (``loop.Drain``); the shares of each destination's limit come back from the
claim itself (leases.DESTINATION_BUDGETS) and go to the drain's gates (gates.SlotGate).

**Roles.** With more than one drain alive, calls to destinations and plain work run in
different processes: the drain of the lowest live slot (``calls``) puts destination steps
first and takes plain steps only while it has no call in flight; every other drain
(``plain``) puts plain steps first and, while it runs ABSTAIN_PLAIN plain steps or more and
for ABSTAIN_LINGER after, takes no destination step. Meanwhile it abstains: its share of each
destination's limit goes to the drains that call (roles.Roles holds the lock that says so).
A call's answer then never waits for an interpreter busy with plain handlers (the GIL), and
neither kind starves, since each has a drain that puts it first. A single plain step (a
spawner between two batches, a timer) hardly slows a drain: for it, a drain goes on calling
— abstaining handed a large limit to one drain, which cannot keep it busy alone (in `bench
destination` at a limit of 256, through every batch of the calls' own spawner). A drain
alone (``both``) does both.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["both", "calls", "plain"]

CLAIM_RETRY = 0.2  # seconds before claiming again after an empty claim
ABSTAIN_LINGER = 1.0  # seconds a drain goes on abstaining after its plain work (a gap in a backlog)
ABSTAIN_PLAIN = 2  # plain steps in flight that make a drain of the plain role abstain


@dataclass(frozen=True)
class DrainView:
    """What the decision reads of a drain, at monotonic time ``now``."""

    now: float
    batch: int  # plain steps in flight at most
    bound_cap: int  # destination-bound steps in flight at most (running or queued for a slot)
    plain_in_flight: int
    bound_in_flight: int
    role: Role
    suspect: bool = False  # a step in flight may kill its worker: it runs alone
    plain_seen_at: float = float("-inf")  # when ABSTAIN_PLAIN plain steps were last in flight
    bound_retry_at: float = 0.0  # no destination claim before this (the last one found none)
    bound_claimed_at: float = float("-inf")  # the last claim that looked for destination steps
    queues: Sequence[tuple[int, int]] = ()  # (steps queued, slots held) of each destination's gate
    queue_depth: int = 2  # leases.QUEUE_DEPTH: steps claimed ahead per slot


@dataclass(frozen=True)
class Claim:
    """The decision: claim up to ``plain`` plain and ``bound`` destination-bound steps;
    ``abstain``: leave this drain's share of every destination to the drains that call. The
    two times are the drain's to keep for the next ``DrainView``."""

    plain: int
    bound: int
    abstain: bool
    plain_seen_at: float
    bound_claimed_at: float

    @property
    def room(self) -> int:
        return self.plain + self.bound


def role_of(slot: int | None, live: Collection[int]) -> Role:
    """The role of the drain in ``slot`` among the ``live`` drain slots (None: a drain outside
    a slot — a test, a command — does both)."""
    if slot is None:
        return "both"
    slots = set(live) | {slot}
    return "both" if len(slots) == 1 else "calls" if slot == min(slots) else "plain"


def decide(view: DrainView) -> Claim:
    """What the drain claims now (see the module doc)."""
    plain = view.batch - view.plain_in_flight
    if plain < max(1, view.batch // 4):
        plain = 0  # claim plain steps in batches, not one by one
    looks = _looks_for_destination_steps(view)
    bound = max(0, view.bound_cap - view.bound_in_flight) if looks else 0
    if view.role == "calls" and view.bound_in_flight:
        plain = 0  # its calls run on: plain steps are for the other drains
    plain_seen_at = view.now if view.plain_in_flight >= ABSTAIN_PLAIN else view.plain_seen_at
    # Its plain steps run on (or ran a moment ago: a gap between two batches of a backlog
    # must not hand the shares back and forth): destinations are for the drain that calls.
    abstain = view.role == "plain" and view.now - plain_seen_at < ABSTAIN_LINGER
    if abstain:
        bound = 0
    if view.suspect:
        plain = bound = 0  # a step that may kill its worker runs alone (leases.py, "Isolation")
    return Claim(plain=plain, bound=bound, abstain=abstain, plain_seen_at=plain_seen_at,
                 bound_claimed_at=view.now if looks else view.bound_claimed_at)


def _looks_for_destination_steps(view: DrainView) -> bool:
    """After a claim that found no destination step claimable, look again only once the drain
    has freed a slot itself (a commit resets ``bound_retry_at``) or after CLAIM_RETRY: a
    plain-only load then pays no destination statements on every turn. And not while every
    destination the drain serves has a queue of at least one step per slot — it will not run
    dry before the next turn — but still every CLAIM_RETRY, for free slots and other
    destinations."""
    if view.now < view.bound_retry_at:
        return False
    saturated = bool(view.queues) and all(queued >= slots * view.queue_depth / 2 > 0 for queued, slots in view.queues)
    return not (saturated and view.now - view.bound_claimed_at < CLAIM_RETRY)
