"""``crash_mid_spawn``: SIGKILL the worker running the spawner once at least a quarter of the
children exist (and not all of them). Another worker re-claims the spawner after its lease expires and resumes at the
committed cursor (S3); children created before the crash are re-linked, never re-created
(S2)."""

from __future__ import annotations

import signal
import time
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import Lab, QCluster, ScenarioError, items, leased_by, query


def spawner(parent: Any) -> tuple[int, str, int, int, int]:
    """(step id, status, attempt, lease expiries, fan-out cursor) of the parent's spawner."""
    rows = query("""
        SELECT s.id, s.status, s.attempt, s.lease_expiries, coalesce(f.cursor, 0)
        FROM executions_step s LEFT JOIN executions_fanout f ON f.step_id = s.id
        WHERE s.execution_id = %s AND s.vertex = 'fanout'""", [parent])
    step_id, status, attempt, expiries, cursor_at = rows[0] if rows else (0, "", 0, 0, 0)
    return int(step_id), str(status), int(attempt), int(expiries), int(cursor_at)


def run(lab: Lab, count: int) -> dict[str, Any]:
    batch = max(5, count // 40)  # forty spawn batches, so "mid-spawn" is a wide target
    setup = runner.Setup(items(count), env={"SB_SPAWN_BATCH": str(batch)})

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            step_id, status, _, _, cursor_at = spawner(parent)
            if status == "RUNNING" and count // 4 <= cursor_at < count:
                victim = leased_by([step_id]).get(step_id)
                if victim is not None:
                    cluster.signal(victim, signal.SIGKILL)
                    lab.say(f"crash_mid_spawn: SIGKILLed worker {victim} at spawn cursor {cursor_at:,}/{count:,}")
                    return {"killed_pid": victim, "spawn_batch": batch, "cursor_at_kill": cursor_at}
            if status in ("SUCCEEDED", "FAILED"):
                raise ScenarioError("the spawner finished before it could be killed; give it more items")
            time.sleep(0.002)
        raise ScenarioError("the spawner never reached a quarter of its items")

    def verify(parent: Any, faults: dict[str, Any], checked: dict[str, Any]) -> list[str]:
        _, status, attempt, expiries, cursor_at = spawner(parent)
        faults.update(spawner_attempts=attempt, spawner_lease_expiries=expiries)
        found = []
        if (status, attempt, expiries) != ("SUCCEEDED", 2, 1):
            found.append(f"spawner ended {status} after {attempt} attempts and {expiries} lease expiries; "
                         "expected SUCCEEDED on its 2nd attempt after 1 expiry")
        if cursor_at != count:
            found.append(f"spawn cursor ended at {cursor_at:,}, not {count:,}")
        return found

    return runner.run(lab, "crash_mid_spawn", setup, inject,
                      lambda faults: Expect(reexecution_bound=runner.bound(1)), verify)
