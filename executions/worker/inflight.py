"""The steps a drain has claimed and not yet committed: what each one is doing, and which
have finished."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass

from executions.core.outcomes import Outcome, failed
from executions.core.runs import StepRun
from executions.worker.futures import StepFuture
from executions.worker.gates import SlotGate
from workflows.dsl import ast


@dataclass
class InFlight:
    run: StepRun
    started: float = 0.0  # monotonic time the handler started (0: still queued)
    deadline: float | None = None
    lost: bool = False  # its lease was taken over: not started yet, it never will
    shown_running: bool = False  # its execution was marked RUNNING while it ran
    on_loop: bool = False  # runs on the drain's event loop (a timed-out one is cancelled)
    holds_slot: bool = True  # its row holds a destination slot (False: claimed into the queue)
    gate: SlotGate | None = None  # its destination's slots in this drain (a destination-bound step)
    admitted: float = 0.0  # monotonic time its gate gave it a slot to run in (0: still queued)
    held_back: bool = False  # its call failed at an adaptive destination: its slot is not used again

    @property
    def bound(self) -> bool:
        """It calls a destination (S11): it runs in one of its drain's slots there."""
        return self.run.claimed.destination_id is not None

    def start_clock(self) -> None:
        """Its handler starts now: its ``timeoutSeconds`` run from here."""
        self.started = time.monotonic()
        vertex = self.run.vertex
        if isinstance(vertex, ast.WorkVertex):
            self.deadline = self.started + vertex.timeout_seconds


class InFlightSteps:
    """The drain's steps in flight, by future. Every future, as it settles (a done-callback,
    on whatever thread settles it), is put on ``finished``: ``settled`` takes what finished
    from there instead of waiting on every future in flight (up to DESTINATION_IN_FLIGHT of
    them, each with a lock to take, on every turn). Futures no longer here (timed out,
    fenced off, released) are skipped."""

    def __init__(self) -> None:
        self.entries: dict[StepFuture, InFlight] = {}
        self.finished: queue.SimpleQueue[StepFuture] = queue.SimpleQueue()

    def add(self, future: StepFuture, entry: InFlight) -> None:
        self.entries[future] = entry
        future.add_done_callback(self.finished.put)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[InFlight]:
        return iter(self.entries.values())

    def pop(self, future: StepFuture) -> InFlight:
        return self.entries.pop(future)

    def clear(self) -> None:
        self.entries.clear()

    def bound(self) -> int:
        """How many of them call a destination."""
        return sum(entry.bound for entry in self.entries.values())

    def suspect(self) -> bool:
        """Is one of them a step that may kill its worker (leases.py, "Isolation")?"""
        return any(entry.run.claimed.suspect for entry in self.entries.values())

    def settled(self, *, until: float, enough: int) -> list[StepFuture]:
        """The futures in flight that have settled: all there are now, waiting until
        monotonic time ``until`` for at least ``enough`` of them."""
        done: list[StepFuture] = []
        seen: set[StepFuture] = set()
        while True:
            try:
                left = until - time.monotonic()
                future = self.finished.get_nowait() if len(done) >= enough or left <= 0 else \
                    self.finished.get(timeout=left)
            except queue.Empty:
                return done
            if future in self.entries and future not in seen:
                seen.add(future)
                done.append(future)

    def expire_timeouts(self, finished: list[InFlight]) -> list[tuple[StepRun, Outcome]]:
        """Fail the steps past their ``timeoutSeconds`` (they leave, added to ``finished``)."""
        now = time.monotonic()
        expired = [(future, entry) for future, entry in self.entries.items()
                   if entry.deadline is not None and now > entry.deadline]
        results = []
        for future, entry in expired:
            del self.entries[future]  # a thread runs on, its late result dropped; the loop's is cancelled
            finished.append(entry)
            if entry.on_loop:
                future.cancel()
            seconds = now - entry.started
            results.append((entry.run, failed(f"timed out after {seconds:.1f}s (timeoutSeconds "
                                              f"{entry.run.vertex.timeout_seconds:g})")))  # type: ignore[attr-defined]
        return results

    def lost(self, kept: set[int]) -> list[tuple[StepFuture, InFlight]]:
        """Not RUNNING with our token any more (not in ``kept``), yet neither finished here nor
        moved on by its own vertex (a MERGE or CHAIN commits itself): another worker has it."""
        return [(future, entry) for future, entry in self.entries.items()
                if entry.run.step_id not in kept and not future.done() and not entry.run.finished_itself]
