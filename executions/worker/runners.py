"""Where a claimed step runs: the event loop (HTTP steps, ``async def`` handlers), the thread
pool (everything else), or — a destination-bound step — whichever of them once its
destination's gate gives it one of the drain's slots there (gates.SlotGate)."""

from __future__ import annotations

import threading
import time

from django import db
from django.db import close_old_connections

from executions.core.outcomes import Outcome
from executions.core.runs import LeaseLost
from executions.engine import runner as engine
from executions.platform import logcontext as logs
from executions.worker.futures import StepFuture, settle
from executions.worker.gates import SlotGate
from executions.worker.inflight import InFlight
from executions.worker.pools import InlineExecutor, StepLoop, StepPool


def ended(entry: InFlight, gate: SlotGate) -> None:
    """A gated step's call ended: its slot goes back to the gate, which pauses on a throttled
    answer and holds the slot of a failed one back at an adaptive destination (gates.py)."""
    flow = entry.run.extra.get("flow")
    entry.held_back = gate.release(pause=entry.run.extra.get("pause"),
                                   failed=flow is not None and flow[0] == "failed")


class Runners:
    """The drain's thread pool and event loop. ``threads=0`` runs steps inline on the calling
    thread (tests, single-step debugging), async ones included (HTTP steps then use the
    blocking client)."""

    def __init__(self, threads: int) -> None:
        self.pool: StepPool | InlineExecutor = StepPool(threads) if threads > 0 else InlineExecutor()
        self.step_loop: StepLoop | None = None  # started with the first step that needs it

    @property
    def inline(self) -> bool:
        return isinstance(self.pool, InlineExecutor)

    def start(self, entry: InFlight, gate: SlotGate | None) -> StepFuture:
        """Hand a claimed step to where it runs; a destination-bound one (``gate``) starts
        when one of the drain's slots at its destination is free."""
        loop = None
        if engine.runs_async(entry.run) and not self.inline:
            loop = self.step_loop = self.step_loop or StepLoop()
        entry.on_loop = loop is not None
        if self.inline:
            return self.pool.submit(self._execute, entry)  # runs now: no one waits for a thread
        if gate is not None:
            entry.gate = gate
            return self._start_gated(entry, gate, loop)
        if loop is not None:
            future = StepFuture()
            loop.start(self._execute_async(entry), future)
            return future
        return self.pool.submit(self._execute, entry, owner=entry.run.execution.root_id or entry.run.execution.id)

    def _start_gated(self, entry: InFlight, gate: SlotGate, loop: StepLoop | None) -> StepFuture:
        """Queue the step at its gate. When the gate starts it, the step takes the gate's copy
        of the destination's settings — fresh, or the gate would not have started it — not
        the one it was claimed with, which may be older (copies.py)."""
        future = StepFuture()

        def admitted() -> None:
            entry.admitted = time.monotonic()
            if gate.copy is not None:
                entry.run.destination = gate.copy.values

        if loop is not None:
            async def call() -> Outcome:
                try:
                    return await self._execute_async(entry)
                finally:
                    ended(entry, gate)

            def start() -> None:
                admitted()
                if future.cancelled():  # timed out or shut down while queued
                    gate.release()
                    return
                loop.start(call(), future)
        else:
            def work() -> None:
                try:
                    if not future.cancelled():
                        settle(future, lambda: self._execute(entry))
                finally:
                    ended(entry, gate)
                    db.connections.close_all()  # this thread's own connection goes with it

            def start() -> None:
                admitted()
                threading.Thread(target=work, name="sb-step-bound", daemon=True).start()

        gate.submit(start, holds_slot=entry.holds_slot)
        return future

    def _execute(self, entry: InFlight) -> Outcome:
        if entry.lost:
            raise LeaseLost(f"step {entry.run.step_id} lost its lease before it started")
        entry.start_clock()
        try:
            with logs.step_context(entry.run):
                return engine.execute(entry.run)
        finally:
            if not self.inline:
                # Vertices that use the database do so on this thread's own connection.
                close_old_connections()

    async def _execute_async(self, entry: InFlight) -> Outcome:
        if entry.lost:
            raise LeaseLost(f"step {entry.run.step_id} lost its lease before it started")
        entry.start_clock()
        with logs.step_context(entry.run):  # contextvars: each task on the loop has its own
            return await engine.execute_async(entry.run)

    def shutdown(self) -> None:
        """Cancel what has not started; stop the event loop (results after a drain ends are
        fenced off anyway)."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.step_loop is not None:
            self.step_loop.shutdown()
