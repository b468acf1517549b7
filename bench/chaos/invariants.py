"""The invariants every scenario is checked against, read from the database afterwards.

* exactly N children with N distinct child keys (exactly-once creation, S2);
* every execution of the run terminal, and no step left open anywhere;
* items in = succeeded + failed + cancelled, and the fan-out counters agree with the rows;
* the merge and the parent ended as the scenario expects;
* zero results committed with a stale lease (S5): every step moved into its terminal status
  exactly once, by its final attempt, and every child's output was produced by that final
  attempt (``demo.crash_if`` returns the attempt that ran it), so no late result of an
  earlier, fenced-off attempt was committed;
* every destination slot is free (no RUNNING step holds one);
* re-executions are counted (at-least-once made visible) and bounded by the faults injected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.chaos.lab import query

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
FENCED_NOTE = "discarded %"  # engine.commit and the drain's heartbeat note fenced-off results so


@dataclass(frozen=True)
class Expect:
    merge: str = "SUCCEEDED"
    parent: str = "SUCCEEDED"
    failed_children: int = 0
    min_fenced_discards: int = 0
    reexecution_bound: int | None = None


TREE = "SELECT id FROM executions_execution WHERE id = %(p)s OR root_id = %(p)s"

CHILDREN = """
    SELECT count(*), count(DISTINCT (parent_id, spawn_vertex, item_index)),
           count(*) FILTER (WHERE status = 'SUCCEEDED'), count(*) FILTER (WHERE status = 'FAILED'),
           count(*) FILTER (WHERE status = 'CANCELLED')
    FROM executions_execution WHERE parent_id = %(p)s
"""

OPEN = f"""
    SELECT (SELECT count(*) FROM executions_execution
            WHERE id IN ({TREE}) AND status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')),
           (SELECT count(*) FROM executions_step WHERE status IN ('READY', 'RUNNING', 'WAITING'))
"""  # noqa: S608 - constant SQL

FANOUT = """
    SELECT total, created, succeeded, failed, cancelled, spawn_complete
    FROM executions_fanout WHERE execution_id = %(p)s
"""

STEPS = f"""
    SELECT count(*), coalesce(sum(s.attempt - 1), 0), coalesce(sum(s.lease_expiries), 0)
    FROM executions_step s WHERE s.execution_id IN ({TREE})
"""  # noqa: S608 - constant SQL

# Terminal steps whose history is not "one move into the terminal status, by the final attempt".
BAD_TERMINAL = f"""
    WITH steps AS (SELECT s.id, s.status, s.attempt FROM executions_step s WHERE s.execution_id IN ({TREE})),
    moves AS (
        SELECT e.step_id, count(*) AS n, min(e.attempt) AS lo, max(e.attempt) AS hi
        FROM executions_event e
        WHERE e.execution_id IN ({TREE}) AND e.to_status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
        GROUP BY e.step_id
    )
    SELECT count(*) FROM steps s LEFT JOIN moves m ON m.step_id = s.id
    WHERE s.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
      AND (m.n IS DISTINCT FROM 1 OR m.lo <> s.attempt OR m.hi <> s.attempt)
"""  # noqa: S608 - constant SQL

# Succeeded child steps whose committed output came from another attempt than the final one.
STALE_OUTPUTS = """
    SELECT count(*) FROM executions_step s
    JOIN executions_execution c ON c.id = s.execution_id AND c.parent_id = %(p)s
    JOIN executions_payload o ON o.execution_id = s.execution_id AND o.name = s.vertex
    WHERE s.status = 'SUCCEEDED' AND (o.data ->> 'attempt')::int IS DISTINCT FROM s.attempt
"""

FENCED = f"""
    SELECT count(*) FROM executions_event
    WHERE execution_id IN ({TREE}) AND from_status = '' AND message LIKE %(note)s
"""  # noqa: S608 - constant SQL

SLOTS = """
    SELECT d.name, d.concurrency_limit, count(s.id)
    FROM executions_destination d
    LEFT JOIN executions_step s ON s.destination_id = d.id AND s.status = 'RUNNING' AND s.holds_slot
    GROUP BY d.id, d.name, d.concurrency_limit ORDER BY d.name
"""

MERGE = "SELECT status FROM executions_step WHERE execution_id = %(p)s AND vertex = 'join'"
PARENT = "SELECT status FROM executions_execution WHERE id = %(p)s"


def check(parent_id: Any, items: int, expect: Expect) -> dict[str, Any]:
    """Read the invariants of the run rooted at ``parent_id``; ``violations`` lists any broken one."""
    p = {"p": parent_id}
    children, distinct_keys, succeeded, failed, cancelled = query(CHILDREN, p)[0]
    open_executions, open_steps = query(OPEN, p)[0]
    fanout = query(FANOUT, p)
    total, created, f_succeeded, f_failed, f_cancelled, spawn_complete = fanout[0] if fanout else (0,) * 5 + (False,)
    steps, reexecutions, lease_expiries = query(STEPS, p)[0]
    bad_terminal = query(BAD_TERMINAL, p)[0][0]
    stale_outputs = query(STALE_OUTPUTS, p)[0][0]
    fenced = query(FENCED, {**p, "note": FENCED_NOTE})[0][0]
    slots = [{"destination": name, "limit": limit, "in_use": in_use} for name, limit, in_use in query(SLOTS)]
    merge = query(MERGE, p)
    merge_status = merge[0][0] if merge else None
    parent_status = query(PARENT, p)[0][0]
    result = {
        "children": children,
        "distinct_child_keys": distinct_keys,
        "duplicate_children": children - distinct_keys,
        "non_terminal_executions": open_executions,
        "open_steps": open_steps,
        "items_in": items,
        "succeeded": succeeded,
        "failed": failed,
        "cancelled": cancelled,
        "fanout_counters": {"total": total, "created": created, "succeeded": f_succeeded, "failed": f_failed,
                            "cancelled": f_cancelled, "spawn_complete": spawn_complete},
        "merge_status": merge_status,
        "parent_status": parent_status,
        "stale_results_committed": bad_terminal + stale_outputs,
        "fenced_discards": fenced,
        "destination_slots": slots,
        "steps": steps,
        "step_reexecutions": int(reexecutions),
        "lease_expiries": int(lease_expiries),
        "reexecution_bound": expect.reexecution_bound,
    }
    result["violations"] = violations(result, items, expect)
    return result


def violations(r: dict[str, Any], items: int, expect: Expect) -> list[str]:
    found = []

    def must(condition: bool, message: str) -> None:
        if not condition:
            found.append(message)

    must(r["children"] == items, f"children = {r['children']:,}, expected {items:,}")
    must(r["distinct_child_keys"] == items, f"distinct child keys = {r['distinct_child_keys']:,}, expected {items:,}")
    must(r["non_terminal_executions"] == 0, f"{r['non_terminal_executions']} executions are not terminal")
    must(r["open_steps"] == 0, f"{r['open_steps']} steps are still READY, RUNNING or WAITING")
    done = r["succeeded"] + r["failed"] + r["cancelled"]
    must(done == items, f"items in {items:,} != succeeded + failed + cancelled {done:,}")
    counters = r["fanout_counters"]
    must((counters["total"], counters["created"], counters["succeeded"], counters["failed"], counters["cancelled"])
         == (items, items, r["succeeded"], r["failed"], r["cancelled"]),
         f"fan-out counters {counters} disagree with the children's rows")
    must(r["failed"] == expect.failed_children, f"{r['failed']} children failed, expected {expect.failed_children}")
    must(r["cancelled"] == 0, f"{r['cancelled']} children were cancelled")
    must(r["merge_status"] == expect.merge, f"merge is {r['merge_status']}, expected {expect.merge}")
    must(r["parent_status"] == expect.parent, f"parent is {r['parent_status']}, expected {expect.parent}")
    must(r["stale_results_committed"] == 0, f"{r['stale_results_committed']} results committed with a stale lease")
    must(r["fenced_discards"] >= expect.min_fenced_discards,
         f"{r['fenced_discards']} fenced discards, expected at least {expect.min_fenced_discards}")
    busy = [s for s in r["destination_slots"] if s["in_use"]]
    must(not busy, f"destination slots still held: {busy}")
    if expect.reexecution_bound is not None:
        must(r["step_reexecutions"] <= expect.reexecution_bound,
             f"{r['step_reexecutions']} step re-executions exceed the bound {expect.reexecution_bound}")
    return found
