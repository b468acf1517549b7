"""``destination_slot_crash``: every child calls one destination with a concurrency limit
(S11); SIGKILL a worker while it holds some of its slots, ``kills`` times. A slot is a
RUNNING step, so the killed worker's slots come back when the reaper re-queues its steps;
the run finishes, every slot ends free, and the limit is never exceeded on the way."""

from __future__ import annotations

import signal
import threading
import time
from functools import partial
from typing import Any

from django.db import connection

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import (
    Lab,
    QCluster,
    ScenarioError,
    db,
    items,
    leased_by,
    query,
    wait_finished,
    wait_for,
    wait_progress,
)
from bench.chaos.pacing import child_seconds

LIMIT = 8
IN_USE = ("SELECT count(*) FROM executions_step WHERE status = 'RUNNING' AND destination_id IS NOT NULL "
          "AND holds_slot")


class Sampler:
    """Samples the destination's slots in use from a thread of its own (own connection)."""

    def __init__(self) -> None:
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.02):
                in_use = db(lambda: query(IN_USE)[0][0])
                if in_use is not None:
                    self.peak = max(self.peak, int(in_use))
                    self.samples += 1
        finally:
            connection.close()


def run(lab: Lab, count: int, *, kills: int = 2, pace: float | None = None) -> dict[str, Any]:
    seconds = child_seconds(count, pace or 8.0 * kills, lab.workers, concurrency=LIMIT)
    setup = runner.Setup(items(count, seconds=seconds), destination_limit=LIMIT)
    sampler = Sampler()

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        rounds: list[dict[str, Any]] = []
        with sampler:
            for number in range(1, kills + 1):
                wait_progress(parent, number / (kills + 2), count, timeout=lab.timeout)
                victim, slots = _a_worker_holding_slots(cluster)
                cluster.signal(victim, signal.SIGKILL)
                killed_at = time.monotonic()
                lab.say(f"destination_slot_crash: SIGKILLed worker {victim} holding {len(slots)} of {LIMIT} slots")
                wait_for(partial(_released, victim, slots), timeout=lab.timeout,
                         what="the killed worker's slots to come back")
                rounds.append({"pid": victim, "slots_held": len(slots),
                               "seconds_until_slots_back": round(time.monotonic() - killed_at, 2)})
                cluster.wait_for_workers(lab.workers, exclude={r["pid"] for r in rounds})
            wait_finished(lab, parent)  # sampling to the end
        return {"kills": kills, "rounds": rounds, "concurrency_limit": LIMIT, "peak_slots_in_use": sampler.peak,
                "slot_samples": sampler.samples, "child_seconds": seconds}

    def verify(parent: Any, faults: dict[str, Any], checked: dict[str, Any]) -> list[str]:
        if faults["peak_slots_in_use"] > LIMIT:
            return [f"{faults['peak_slots_in_use']} slots in use at once, above the limit of {LIMIT}"]
        return []

    return runner.run(lab, "destination_slot_crash", setup, inject,
                      lambda faults: Expect(reexecution_bound=runner.bound(kills)), verify)


def _released(victim: int, slots: list[int]) -> bool:
    """None of these steps is RUNNING on the killed worker any more (reaped, or re-run elsewhere)."""
    return victim not in leased_by(slots).values()


def _a_worker_holding_slots(cluster: QCluster) -> tuple[int, list[int]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        holders = leased_by(destination=True)
        workers = set(cluster.workers())
        by_pid: dict[int, list[int]] = {}
        for step_id, pid in holders.items():
            if pid in workers:
                by_pid.setdefault(pid, []).append(step_id)
        if by_pid:
            victim = max(by_pid, key=lambda pid: len(by_pid[pid]))
            return victim, by_pid[victim]
        time.sleep(0.01)
    raise ScenarioError("no worker held a destination slot")
