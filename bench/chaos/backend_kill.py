"""``backend_kill``: ``pg_terminate_backend`` every session of the workers (all but our own)
mid-run, ``kills`` times. Drains reconnect with back-off; what was in flight is re-run after
its lease expires."""

from __future__ import annotations

import time
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import Lab, QCluster, items, query, wait_children_done, wait_progress
from bench.chaos.pacing import child_seconds

TERMINATE = """
    SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
    FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
"""


def run(lab: Lab, count: int, *, kills: int = 2, pace: float | None = None) -> dict[str, Any]:
    seconds = child_seconds(count, pace or 6.0 * kills, lab.workers)
    setup = runner.Setup(items(count, seconds=seconds))

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        rounds = []
        for number in range(1, kills + 1):
            done_before = wait_progress(parent, number / (kills + 2), count, timeout=lab.timeout)
            terminated = query(TERMINATE)[0][0]
            killed_at = time.monotonic()
            lab.say(f"backend_kill: terminated {terminated} sessions ({done_before:,} children done)")
            wait_children_done(parent, done_before + 1, timeout=lab.timeout)
            rounds.append({"sessions_terminated": terminated, "children_done": done_before,
                           "seconds_to_progress": round(time.monotonic() - killed_at, 2)})
        return {"kills": kills, "rounds": rounds, "child_seconds": seconds}

    return runner.run(lab, "backend_kill", setup, inject,
                      lambda faults: Expect(reexecution_bound=runner.bound(kills, workers=lab.workers)))
