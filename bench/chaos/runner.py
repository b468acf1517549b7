"""Running one scenario: reset, start a real cluster and the fan-out, inject the fault,
wait for the run to end, stop the cluster, and check the invariants."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from bench.chaos import invariants
from bench.chaos.lab import (
    DESTINATION,
    Lab,
    QCluster,
    ScenarioError,
    query,
    reset,
    start_fanout,
    wait_finished,
    workspace,
)


@dataclass
class Setup:
    """What the scenario runs: the items, the child's attempts, an optional destination
    (with a concurrency limit) and how many failed children the merge tolerates."""

    items: list[dict[str, Any]]
    max_attempts: int = 10
    destination_limit: int | None = None
    tolerate_failures: int = 0
    env: dict[str, str] = field(default_factory=dict)


Inject = Callable[[QCluster, Any], dict[str, Any]]
Verify = Callable[[Any, dict[str, Any], dict[str, Any]], list[str]]  # (parent, faults, invariants)


def claim_batch() -> int:
    return int(settings.SB["CLAIM_BATCH"])


def bound(events: int, *, workers: int = 1) -> int:
    """At most this many step re-executions for ``events`` faults that each lose the work in
    flight in ``workers`` worker processes (a drain holds at most a claim batch, plus a
    spawner or merge step)."""
    return events * workers * (claim_batch() + 1)


def run(lab: Lab, name: str, setup: Setup, inject: Inject,
        expect: Callable[[dict[str, Any]], invariants.Expect], verify: Verify | None = None) -> dict[str, Any]:
    started = time.monotonic()
    reset()
    if setup.destination_limit is not None:
        from executions.models import Destination

        Destination.objects.update_or_create(
            workspace=workspace(), name=DESTINATION,
            defaults={"base_url": "http://chaos.invalid", "concurrency_limit": setup.destination_limit,
                      "rate_per_second": None, "timeout_seconds": 30.0})
    items = len(setup.items)
    faults: dict[str, Any] = {}
    error = None
    parent = None
    run_seconds = None
    cluster = lab.cluster(**setup.env)
    try:
        parent = start_fanout(setup.items, max_attempts=setup.max_attempts,
                              destination=DESTINATION if setup.destination_limit is not None else None,
                              tolerate_failures=setup.tolerate_failures)
        lab.say(f"{name}: started a fan-out of {items:,} items")
        faults = inject(cluster, parent)
        wait_finished(lab, parent)
        run_seconds = query("SELECT extract(epoch FROM finished_at - created_at) FROM executions_execution "
                            "WHERE id = %s", [parent])[0][0]
        lab.say(f"{name}: the run ended")
    except ScenarioError as failure:
        error = str(failure)
        lab.say(f"{name}: {error}")
    finally:
        cluster.stop()
    result: dict[str, Any] = {
        "scenario": name, "items": items, "parent_execution": str(parent) if parent else None,
        "workers": lab.workers, "lease_seconds": lab.lease_seconds,
        "seconds_total": round(time.monotonic() - started, 2),
        "seconds_run": round(float(run_seconds), 2) if run_seconds is not None else None,
        "faults": faults,
    }
    if parent is None:
        result.update(invariants={}, violations=[error or "the run did not start"], ok=False)
        return result
    checked = invariants.check(parent, items, expect(faults))
    found = checked.pop("violations")
    if error:
        found.insert(0, error)
    if verify is not None and not error:
        found += verify(parent, faults, checked)
    result.update(invariants=checked, violations=found, ok=not found, cluster_log=str(cluster.log_path))
    return result
