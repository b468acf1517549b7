"""A drain's slots at each destination (S11): which queued step may start a call
(handover.py gives a finished step's slot to the queued step that took its place), and with
which copy of the destination's call settings (copies.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from executions.core import leases
from executions.worker.copies import Copy


class SlotGate:
    """The slots one drain holds at one destination (S11), and the steps queued for them.

    ``slots`` is how many of the drain's RUNNING steps there hold a slot in the database;
    ``active`` how many calls really run. A queued step starts as soon as ``active < slots``
    (and the drain's leases are known to be valid: a drain whose heartbeat is late starts
    nothing, since its slots may have been reaped). A call that ends starts the next queued
    step at once, on whatever thread it ended on, in the slot its own step still holds until
    the drain commits it; that commit hands the slot to the step that took its place
    (leases.take_over_slots), so the database never counts fewer slots than calls run.
    ``share``: while other drains wait for slots, a call that ends with ``share`` calls or
    more still running starts nothing: its slot is given up at the commit (handover.hand_over),
    so a drain that took the whole limit hands the surplus back as its calls end.
    ``copy``: the drain's copy of the destination's call settings; a step starts only while
    it is fresh, and with it (copies.py) — a lapsed one waits for the drain to read it again
    (``waiting_for_copy``), so a call never starts with settings a change has replaced.
    ``paused_until``: the destination is cooling down or its breaker is open (issue 29): no
    queued step starts before it. A throttled answer pauses the gate the moment it arrives
    (``release(pause=...)``), before its commit; the drain's commits and copies tell it of
    pauses other drains' answers started (``pause``), so no call starts during a cooldown later
    than the drain's next commit or copy read (within COPY_SECONDS). In adaptive mode a slot
    whose call failed is not used again before the commit gives it up (``held_back``): an
    overloaded server that fails fast would otherwise be sent the next call at once, and
    the next, many times per window.
    Thread-safe: calls end on the event loop or on step threads; the drain's thread claims,
    commits and renews."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots = 0
        self.active = 0
        self.queue: deque[Callable[[], None]] = deque()
        self.valid_until = 0.0  # monotonic time after which nothing starts until a renewal
        self.share: int | None = None  # the slots this drain may use now (None: all it holds)
        self.copy: Copy | None = None  # what its steps' calls use; none started without a fresh one
        self.paused_until = 0.0  # monotonic time before which nothing starts (a cooldown, an open breaker)
        self.held_back = 0  # slots whose call failed (adaptive mode), not used again before the commit

    def submit(self, start: Callable[[], None], *, holds_slot: bool) -> None:
        """Queue a claimed step's start (a step claimed into a free slot brings the slot)."""
        with self.lock:
            self.slots += holds_slot
            self.queue.append(start)
            ready = self._ready()
        self._run(ready)

    def release(self, *, pause: float | None = None, failed: bool = False) -> bool:
        """A call ended: its slot goes to the next queued step, if any — unless its answer
        asked to ``pause`` (seconds) or it ``failed`` at an adaptive destination (then its
        slot is held back until the commit: returns True)."""
        with self.lock:
            self.active -= 1
            if pause:
                self.paused_until = max(self.paused_until, time.monotonic() + pause)
            held = failed and self.copy is not None and self.copy.values.get("concurrency_mode") == "adaptive"
            self.held_back += held
            ready = self._ready()
        self._run(ready)
        return held

    def pause(self, until: float, asked_at: float) -> None:
        """A statement sent at monotonic ``asked_at`` read the destination's flow state: no queued
        step starts before monotonic ``until``, and the copy knows the state (Copy.told)."""
        with self.lock:
            self.paused_until = max(self.paused_until, until)
            if self.copy is not None:
                self.copy = self.copy.told(asked_at)
            ready = self._ready()
        self._run(ready)

    def given_up(self, slots: int, held_back: int) -> None:
        """The commit gave up ``slots`` of this gate's slots, ``held_back`` of them held back."""
        with self.lock:
            self.slots -= slots
            self.held_back = max(0, self.held_back - held_back)
            ready = self._ready()
        self._run(ready)

    def resume(self) -> None:
        """Start what a pause that has ended held back."""
        with self.lock:
            ready = self._ready() if self.queue and self.paused_until and time.monotonic() >= self.paused_until \
                else []
        self._run(ready)

    def resize(self, delta: int) -> None:
        """Slots taken over (+) or given up (-) in the database."""
        with self.lock:
            self.slots += delta
            ready = self._ready()
        self._run(ready)

    def limit_to(self, share: int | None) -> None:
        with self.lock:
            self.share = share
            ready = self._ready()
        self._run(ready)

    def renewed(self, valid_until: float) -> None:
        with self.lock:
            self.valid_until = max(self.valid_until, valid_until)
            ready = self._ready()
        self._run(ready)

    def configure(self, copy: Copy) -> None:
        """A copy of the destination's settings, just read (with how long calls must wait there)."""
        with self.lock:
            self.copy = copy
            if copy.blocked_for > 0:
                self.paused_until = max(self.paused_until, copy.read_at + copy.blocked_for)
            ready = self._ready()
        self._run(ready)

    def confirm(self, version: int, asked_at: float) -> None:
        """A statement sent at ``asked_at`` found the destination at ``version`` (Copy.confirmed)."""
        with self.lock:
            if self.copy is None:
                return
            self.copy = self.copy.confirmed(version, asked_at)
            ready = self._ready()
        self._run(ready)

    def waiting_for_copy(self) -> bool:
        """A queued step would start now but for a lapsed copy: the drain should read it again."""
        with self.lock:
            now = time.monotonic()
            return bool(self.queue) and now < self.valid_until and self.active < self._room() \
                and now >= self.paused_until and not (self.copy is not None and self.copy.fresh(now))

    def _room(self) -> int:
        slots = self.slots - self.held_back
        return slots if self.share is None else min(slots, self.share)

    def _ready(self) -> list[Callable[[], None]]:
        ready: list[Callable[[], None]] = []
        now = time.monotonic()
        if self.queue and now < self.valid_until and now >= self.paused_until and self.copy is not None \
                and self.copy.fresh(now):
            room = self._room()
            while self.queue and self.active < room:
                self.active += 1
                ready.append(self.queue.popleft())
        return ready

    @staticmethod
    def _run(ready: list[Callable[[], None]]) -> None:
        for start in ready:
            start()


class Gates:
    """This drain's SlotGate of each destination it holds slots at (or queues for)."""

    def __init__(self) -> None:
        self.by_destination: dict[int, SlotGate] = {}

    def __iter__(self) -> Iterator[SlotGate]:
        return iter(self.by_destination.values())

    def __bool__(self) -> bool:
        return bool(self.by_destination)

    def get(self, destination: int) -> SlotGate | None:
        return self.by_destination.get(destination)

    def of(self, destination: int) -> SlotGate:
        """The gate of ``destination``, made on its first step."""
        return self.by_destination.get(destination) or self.by_destination.setdefault(destination, SlotGate())

    def queues(self) -> list[tuple[int, int]]:
        """(steps queued, slots held) of each gate: what the claim policy reads."""
        return [(len(gate.queue), gate.slots) for gate in self.by_destination.values()]

    def configure(self, copies: dict[int, Copy]) -> None:
        """Copies of destinations' settings, just read (a claim's, or ``copies.read``)."""
        for destination, copy in copies.items():
            self.of(destination).configure(copy)

    def confirm(self, versions: dict[int, int], asked_at: float) -> None:
        """Versions a statement sent at ``asked_at`` found (a commit's slot take-over)."""
        for destination, version in versions.items():
            if (gate := self.by_destination.get(destination)) is not None:
                gate.confirm(version, asked_at)

    def pause(self, blocked: dict[int, float], since: float) -> None:
        """The flow state a statement sent at monotonic ``since`` read: no call may start for
        ``blocked`` seconds (0: calls may start) at each destination."""
        for destination, seconds in blocked.items():
            if (gate := self.by_destination.get(destination)) is not None:
                gate.pause(since + seconds, since)

    def resume(self) -> None:
        """Start the queued steps of gates whose pause has ended."""
        for gate in self.by_destination.values():
            gate.resume()

    def waiting_for_copies(self) -> list[int]:
        """The destinations whose queued steps wait for their copy to be read again."""
        return [destination for destination, gate in self.by_destination.items() if gate.waiting_for_copy()]

    def limit_to(self, shares: dict[int, int | None]) -> None:
        """The shares of each destination's limit the claim found for this drain."""
        for destination, share in shares.items():
            if (gate := self.by_destination.get(destination)) is not None:
                gate.limit_to(share)

    def renewed(self, since: float) -> None:
        """Leases renewed (or taken) at monotonic time ``since`` stay valid for two thirds of
        their length (the heartbeat renews at one third): queued steps may start until then."""
        for gate in self.by_destination.values():
            gate.renewed(since + leases.lease_seconds() * 2 / 3)

    def prune(self) -> None:
        """Forget the gate of a destination this drain holds nothing at any more (an entry
        still pointing at it holds no slot there)."""
        self.by_destination = {d: g for d, g in self.by_destination.items() if g.slots > 0 or g.active or g.queue}
