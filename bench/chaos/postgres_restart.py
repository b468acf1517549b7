"""``postgres_restart``: stop the database server when about a third of the children have
finished, keep it down for ``downtime`` seconds, start it again. Workers must reconnect and
finish the run without a human; work in flight during the outage is re-run after its lease
expires. Then a second restart while every drain is idle, waiting for a TIMER: the timer
must still fire on time (idle drains reconnect too, not only at the next minute's tick).
Never run against a shared server (the command uses a separate one)."""

from __future__ import annotations

import time
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import (
    TERMINAL,
    Lab,
    QCluster,
    ScenarioError,
    items,
    query,
    wait_children_done,
    wait_finished,
    wait_for,
    wait_progress,
    workspace,
)
from bench.chaos.pacing import child_seconds

TIMER_SECONDS = 8.0
TIMER_LATE_AFTER = 6.0  # seconds past its due time; the scheduled tick would take up to a minute


def run(lab: Lab, count: int, *, downtime: float = 3.0, pace: float = 12.0) -> dict[str, Any]:
    if lab.restart_server is None:
        raise ScenarioError("this lab cannot restart its database server")
    restart = lab.restart_server
    seconds = child_seconds(count, pace, lab.workers)
    setup = runner.Setup(items(count, seconds=seconds))

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        done_before = wait_progress(parent, 1 / 3, count, timeout=lab.timeout)
        lab.say(f"postgres_restart: stopping the server ({done_before:,} children done)")
        stopped = time.monotonic()
        restart(downtime)
        up = time.monotonic()
        lab.say(f"postgres_restart: the server is back after {up - stopped:.1f}s")
        # Recovered: some child finished after the restart, through the workers' new connections.
        done_after = wait_children_done(parent, done_before + 1, timeout=lab.timeout)
        progressed = time.monotonic() - up
        wait_finished(lab, parent)
        return {"restarts": 2, "children_done_at_stop": done_before, "seconds_down": round(up - stopped, 2),
                "seconds_to_progress_after_restart": round(progressed, 2),
                "children_done_at_first_progress": done_after, "child_seconds": seconds,
                "idle_restart": _restart_while_idle(lab, restart, downtime)}

    def verify(parent: Any, faults: dict[str, Any], checked: dict[str, Any]) -> list[str]:
        idle = faults["idle_restart"]
        if idle["status"] != "SUCCEEDED" or idle["seconds_late"] > TIMER_LATE_AFTER:
            return [f"a {TIMER_SECONDS:g}s timer armed before a restart of idle workers ended {idle['status']} "
                    f"{idle['seconds_late']}s late"]
        return []

    return runner.run(lab, "postgres_restart", setup, inject,
                      lambda faults: Expect(reexecution_bound=runner.bound(1, workers=lab.workers)), verify)


def _restart_while_idle(lab: Lab, restart: Any, downtime: float) -> dict[str, Any]:
    """Arm a TIMER, restart the server while every drain idles waiting for it, and measure
    how late it fires."""
    from executions.services import lifecycle as services
    from workflows.services import publish_version

    space = workspace()
    doc = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": TIMER_SECONDS, "next": "done"},
                                         "done": {"type": "SUCCEED"}}}
    publish_version(space, "chaos-timer", doc, author="chaos")
    execution = services.start_execution(space, workflow="chaos-timer", input={}, created_by="chaos").execution
    armed = wait_for(lambda: query("SELECT due_at FROM executions_step WHERE execution_id = %s AND vertex = 'wait' "
                                   "AND due_at > now()", [execution.pk]), timeout=60, what="the timer to be armed")
    due_at = armed[0][0]
    lab.say("postgres_restart: restarting again while the drains idle, waiting for a timer")
    restart(downtime)
    wait_for(lambda: query("SELECT status FROM executions_execution WHERE id = %s", [execution.pk])[0][0]
             in TERMINAL, timeout=lab.timeout, what="the timer's execution to finish")
    status, late = query("SELECT status, extract(epoch FROM finished_at - %s) FROM executions_execution "
                         "WHERE id = %s", [due_at, execution.pk])[0]
    return {"timer_seconds": TIMER_SECONDS, "status": status, "seconds_late": round(float(late), 2)}
