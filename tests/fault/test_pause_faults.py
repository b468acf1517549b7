"""A pause during a spawn, with the spawner's worker SIGKILLed right after it (issue 31):
once the pause has returned no step of the tree is claimed — not the children a batch in
flight committed, not the spawner once its dead worker's lease expires — and after the resume
the fan-out finishes with every child exactly once."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from bench.chaos.lab import Lab, items, leased_by, query, reset, start_fanout, wait_finished, wait_for
from executions.models import Execution
from executions.services import control

pytestmark = [pytest.mark.fault, pytest.mark.e2e, pytest.mark.timeout(240)]

COUNT = 400

TREE_STEPS = """
    SELECT s.id, s.status, s.lease_token::text FROM executions_step s
    JOIN executions_execution e ON e.id = s.execution_id WHERE e.root_id = %s
"""


def _spawner(parent: Any) -> tuple[int, str, int]:
    rows = query("""SELECT s.id, s.status, coalesce(f.cursor, 0) FROM executions_step s
                    LEFT JOIN executions_fanout f ON f.step_id = s.id
                    WHERE s.execution_id = %s AND s.vertex = 'fanout'""", [parent])
    return (int(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else (0, "", 0)


def _tree(parent: Any) -> dict[int, tuple[str, str | None]]:
    return {row[0]: (row[1], row[2]) for row in query(TREE_STEPS, [parent])}


def test_a_pause_during_a_spawn_claims_nothing_after_it_returns_even_across_a_kill(lab: Lab) -> None:
    reset()
    cluster = lab.cluster(SB_SPAWN_BATCH="10")
    try:
        cluster.wait_for_workers(lab.workers)
        parent = start_fanout(items(COUNT), max_attempts=3)
        wait_for(lambda: _spawner(parent)[1] == "RUNNING" and COUNT // 4 <= _spawner(parent)[2] < COUNT,
                 timeout=120, what="the spawner half-way", interval=0.002)
        spawner_id = _spawner(parent)[0]
        victim = leased_by([spawner_id]).get(spawner_id)
        assert victim is not None, "the spawner's worker"

        assert control.pause_execution(Execution.objects.get(pk=parent), actor="fault-test")
        at_pause = _tree(parent)
        running = {step: token for step, (status, token) in at_pause.items() if status == "RUNNING"}
        succeeded = sum(1 for status, _ in at_pause.values() if status == "SUCCEEDED")
        cluster.signal(victim, signal.SIGKILL)
        lab.say(f"pause test: SIGKILLed worker {victim} right after the pause; {len(running)} steps were in flight")

        deadline = time.monotonic() + 3 * lab.lease_seconds + 2  # the dead worker's lease expires, is reaped
        while time.monotonic() < deadline:
            now = _tree(parent)
            claimed_after = [step for step, (status, token) in now.items()
                             if status == "RUNNING" and running.get(step) != token]
            assert not claimed_after, f"steps claimed after the pause returned: {claimed_after}"
            done = sum(1 for status, _ in now.values() if status == "SUCCEEDED")
            assert done - succeeded <= len(running), "more steps finished than were in flight at the pause"
            time.sleep(0.05)
        assert _spawner(parent)[1] == "READY"  # reaped, not re-claimed while paused

        assert control.resume_execution(Execution.objects.get(pk=parent), actor="fault-test")
        wait_finished(lab, parent)
        assert Execution.objects.get(pk=parent).status == "SUCCEEDED"
        assert Execution.objects.filter(parent_id=parent).count() == COUNT
        assert Execution.objects.filter(parent_id=parent, status="SUCCEEDED").count() == COUNT
    finally:
        cluster.stop()
