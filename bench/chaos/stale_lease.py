"""``stale_lease``: SIGSTOP a worker that holds leases (a stop-the-world pause: GC, swap, a
frozen VM) until its leases have expired and every step it held was re-run by another
worker, then SIGCONT it. Its late results must be fenced off: discarded and noted, never
committed."""

from __future__ import annotations

import signal
import time
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import FENCED_NOTE, Expect
from bench.chaos.lab import Lab, QCluster, ScenarioError, items, leased_by, query, wait_for, wait_progress
from bench.chaos.pacing import child_seconds

# A session left inside a transaction while its process is stopped holds its row locks (the
# merge's fan-out row, say) and would stall everyone: stop the worker between transactions
# instead, as a GC pause would usually find it. The stopped worker's sessions cannot be told
# apart from the others', so: sample the open transactions twice, some time after the stop;
# one open in both samples may be the stopped worker's (a statement sent just before the stop
# can still be running at the first sample), and the stop is tried again later.
OPEN_TRANSACTIONS = """
    SELECT pid, xact_start FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
"""
SETTLE = 0.3  # seconds between the stop and each sample

# Steps of the stopped worker that another worker took over: a later attempt is running
# elsewhere or has finished.
REDONE = """
    SELECT count(*) FROM executions_step s
    JOIN unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempt) ON held.id = s.id
    WHERE s.attempt > held.attempt
      AND (s.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') OR (s.status = 'RUNNING' AND s.leased_by <> %(victim)s))
"""

NOTED = """
    SELECT count(*) FROM executions_event
    WHERE step_id = ANY(%(ids)s) AND from_status = '' AND message LIKE %(note)s
"""


def run(lab: Lab, count: int, *, pace: float = 10.0) -> dict[str, Any]:
    if lab.workers < 2:
        raise ScenarioError("stale_lease needs at least 2 workers: one to pause, one to re-run its steps")
    seconds = child_seconds(count, pace, lab.workers)
    setup = runner.Setup(items(count, seconds=seconds))

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        wait_progress(parent, 0.25, count, timeout=lab.timeout)
        victim, held = _stop_a_worker_between_transactions(cluster)
        stopped_at = time.monotonic()
        ids = sorted(held)
        attempts = [held[i] for i in ids]
        label = query("SELECT leased_by FROM executions_step WHERE id = %s", [ids[0]])[0][0]
        lab.say(f"stale_lease: SIGSTOPped worker {victim} holding {len(ids)} leases")
        try:
            wait_for(lambda: query(REDONE, {"ids": ids, "victim": label, "attempts": attempts})[0][0] == len(ids),
                     timeout=lab.timeout, what="every step of the stopped worker to be re-run elsewhere")
        finally:
            cluster.signal(victim, signal.SIGCONT)
        stopped_for = time.monotonic() - stopped_at
        lab.say(f"stale_lease: SIGCONTed worker {victim} after {stopped_for:.1f}s; its steps were re-run elsewhere")
        noted = wait_for(lambda: query(NOTED, {"ids": ids, "note": FENCED_NOTE})[0][0], timeout=60,
                         what="the stopped worker's late results to be fenced off")
        return {"stopped_pid": victim, "leases_held": len(ids), "seconds_stopped": round(stopped_for, 2),
                "late_results_fenced": noted, "child_seconds": seconds}

    return runner.run(lab, "stale_lease", setup, inject,
                      lambda faults: Expect(min_fenced_discards=1, reexecution_bound=runner.bound(1)))


def _stop_a_worker_between_transactions(cluster: QCluster) -> tuple[int, dict[int, int]]:
    """SIGSTOP a worker holding leases while none of its sessions is inside a transaction;
    returns its pid and the attempts of the steps it held (step id → attempt)."""
    for _ in range(200):
        holders = leased_by()
        pids = sorted(set(holders.values()) & set(cluster.workers()))
        if pids:
            victim = pids[0]
            cluster.signal(victim, signal.SIGSTOP)
            time.sleep(SETTLE)
            first = set(query(OPEN_TRANSACTIONS))
            time.sleep(SETTLE)
            if not first & set(query(OPEN_TRANSACTIONS)):
                held = [step_id for step_id, pid in leased_by().items() if pid == victim]
                if held:
                    rows = query("SELECT id, attempt FROM executions_step WHERE id = ANY(%s)", [held])
                    return victim, {int(step_id): int(attempt) for step_id, attempt in rows}
            cluster.signal(victim, signal.SIGCONT)
        time.sleep(0.1)
    raise ScenarioError("could not stop a worker holding leases between its transactions")
