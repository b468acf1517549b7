"""``poison_pill``: children whose handler SIGKILLs its worker on every attempt. Each is
failed by the reaper after its ``maxAttempts`` lease expiries ("lease expired N times"); the
rest of the fan-out completes (the merge tolerates exactly the poisoned children) and
nothing loops forever."""

from __future__ import annotations

import random
from typing import Any

from bench.chaos import runner
from bench.chaos.invariants import Expect
from bench.chaos.lab import Lab, QCluster, items, query

MAX_ATTEMPTS = 3


def run(lab: Lab, count: int, *, poison: int = 1, seed: int | None = None) -> dict[str, Any]:
    rng = random.Random(seed)  # noqa: S311 - which items are poisoned, not security
    poisoned = frozenset(rng.sample(range(count), poison))
    setup = runner.Setup(items(count, crash=poisoned), max_attempts=MAX_ATTEMPTS, tolerate_failures=poison)

    def inject(cluster: QCluster, parent: Any) -> dict[str, Any]:
        lab.say(f"poison_pill: items {sorted(poisoned)} kill their worker on every attempt")
        return {"poisoned_items": sorted(poisoned), "max_attempts": MAX_ATTEMPTS}

    def verify(parent: Any, faults: dict[str, Any], checked: dict[str, Any]) -> list[str]:
        rows = query("""
            SELECT c.item_index, c.status, s.status, s.attempt, s.lease_expiries, s.error
            FROM executions_execution c JOIN executions_step s ON s.execution_id = c.id
            WHERE c.parent_id = %s AND (c.status <> 'SUCCEEDED' OR c.item_index = ANY(%s))
            ORDER BY c.item_index""", [parent, sorted(poisoned)])
        faults["poisoned_children"] = [{"item": row[0], "status": row[1], "attempts": row[3],
                                        "lease_expiries": row[4], "error": row[5]} for row in rows]
        expected_error = (f"lease expired {MAX_ATTEMPTS} times (its worker was lost each time); "
                          f"gave up after {MAX_ATTEMPTS} attempts")
        found = [f"item {row[0]}: child {row[1]}, step {row[2]} after {row[3]} attempts "
                 f"({row[4]} lease expiries): {row[5]!r}"
                 for row in rows
                 if row[0] not in poisoned or (row[1], row[2], row[3], row[4], row[5])
                 != ("FAILED", "FAILED", MAX_ATTEMPTS, MAX_ATTEMPTS, expected_error)]
        faults["poisoned_children"] = faults["poisoned_children"][:20]
        return found[:10] + ([f"... and {len(found) - 10} more children"] if len(found) > 10 else [])

    return runner.run(lab, "poison_pill", setup, inject,
                      lambda faults: Expect(failed_children=poison,
                                            reexecution_bound=runner.bound(poison * MAX_ATTEMPTS)), verify)
