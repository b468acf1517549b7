"""``repeated_kills``: SIGKILL a random worker process every few seconds, K times, during
an N-item fan-out. django-q's sentinel restarts each killed worker; the scenario waits for
the replacement before the next kill. The killed workers' steps are re-run after their
leases expire (at-least-once), their children are never created twice."""

from __future__ import annotations

import random
import signal
import time
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import Lab, QCluster, ScenarioError, items, progress
from bench.chaos.pacing import child_seconds


def run(lab: Lab, count: int, *, kills: int = 5, interval: float = 2.0, seed: int | None = None,
        pace: float | None = None) -> dict[str, Any]:
    rng = random.Random(seed)  # noqa: S311 - fault timing, not security
    seconds = child_seconds(count, pace or kills * interval * 1.5, lab.workers)
    setup = runner.Setup(items(count, seconds=seconds))

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        killed: list[dict[str, Any]] = []
        for number in range(1, kills + 1):
            time.sleep(interval * rng.uniform(0.5, 1.5))  # the fault's timing, not a wait for a condition
            state = progress(parent)
            if state[2] != "RUNNING" and state[2] != "PENDING":
                raise ScenarioError(f"the run ended after {len(killed)} of {kills} kills; give it more items")
            victim = rng.choice(cluster.workers())
            cluster.signal(victim, signal.SIGKILL)
            killed.append({"pid": victim, "children_done": state[1], "spawn_cursor": state[0]})
            lab.say(f"repeated_kills: SIGKILLed worker {victim} ({number}/{kills}, {state[1]:,} children done)")
            cluster.wait_for_workers(lab.workers, exclude={k["pid"] for k in killed})
        return {"kills": len(killed), "killed": killed, "child_seconds": seconds,
                "workers_alive_at_end": len(cluster.workers())}

    def verify(parent: Any, faults: dict[str, Any], checked: dict[str, Any]) -> list[str]:
        if faults["workers_alive_at_end"] < lab.workers:
            return [f"only {faults['workers_alive_at_end']} of {lab.workers} workers alive after the kills"]
        return []

    return runner.run(lab, "repeated_kills", setup, inject,
                      lambda faults: Expect(reexecution_bound=runner.bound(faults.get("kills", kills))), verify)
