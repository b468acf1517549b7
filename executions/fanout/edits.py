"""Live edits of a running fan-out (issue 31 §2, S25): an operator changes ``maxConcurrency``
or the failure tolerance (``maxFailureRatio``, ``maxFailures``) of one fan-out.

The override is the fan-out row's own columns (``max_concurrency``, ``max_failure_ratio``,
``max_failures`` and ``allowed_failures``, which the MERGE rule reads: merge_rule.py), never
the pinned version, whose hash stays; each edit adds a ``FanOutEdit`` row with the values
before and after. One transaction, the fan-out row locked first (as a spawn batch locks it):

* ``maxConcurrency`` takes effect at the next claim: a raise (or ``null``, no limit) releases
  held children at once (records.release_held_steps, item order); a cut holds back the
  children not yet released (``free_slots`` may go below zero: running children finish). A
  spawner in the middle of a batch applies a limit set from ``null`` from its next batch on.
* The tolerance moves ``allowed_failures``; then ``reevaluate_merge_after_edit`` wakes the
  MERGE if the fan-out is now decided (lowering the tolerance can fail it at once under
  failFast, which then stops the spawner and cancels the unfinished children as documented
  in docs/dsl.md; raising it lets a merge that waits for its last children succeed).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from executions.core import records, state
from executions.core.merge_rule import VERDICTS, allowed_failures

UNSET: Any = object()  # a field the edit leaves as it is

# The fan-out of ``vertex`` in ``execution``, locked, with the merge rule's verdicts.
LOCK_FANOUT = f"""
    SELECT f.*, {VERDICTS} FROM executions_fanout f
    WHERE f.execution_id = %(execution)s AND f.spawner_vertex = %(vertex)s
    FOR UPDATE OF f
"""  # noqa: S608 - constant SQL fragments only

# Unfinished children that hold a slot or run unheld: created, not terminal, not held.
UNFINISHED_RELEASED = """
    SELECT count(*) FROM executions_execution c
    WHERE c.parent_id = %(execution)s AND c.spawn_vertex = %(vertex)s AND c.status IN ('PENDING', 'RUNNING')
      AND NOT EXISTS (SELECT 1 FROM executions_step st
                      WHERE st.execution_id = c.id AND st.due_at = %(held_until)s::timestamptz)
"""

APPLY = f"""
    UPDATE executions_fanout f
    SET max_concurrency = %(max_concurrency)s, free_slots = %(free_slots)s, release_cursor = %(release_cursor)s,
        max_failure_ratio = %(ratio)s, max_failures = %(max_failures)s, allowed_failures = %(allowed)s
    WHERE f.step_id = %(step)s
    RETURNING f.*, {VERDICTS}
"""  # noqa: S608 - constant SQL fragments only

RECORD = """
    INSERT INTO executions_fanoutedit (fanout_id, actor, changes, created_at)
    VALUES (%(step)s, %(actor)s, %(changes)s::jsonb, now())
"""


class FanOutNotFound(Exception):
    pass


class QuorumTolerance(Exception):
    """A quorum merge's fan-out: its tolerance is the quorum's (total − minSuccessful
    failures, failFast: merge_rule.py), which an edit of the tolerance would replace."""


def _row(cursor: Any) -> dict[str, Any] | None:
    row = cursor.fetchone()
    return None if row is None else dict(zip([c.name for c in cursor.description], row, strict=True))


def edit(cursor: Any, execution_id: uuid.UUID, vertex: str, *, actor: str, max_concurrency: Any = UNSET,
         max_failure_ratio: Any = UNSET, max_failures: Any = UNSET) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Apply the edit (inside the caller's transaction); returns the fan-out row after it and
    the changes (field → [before, after], only the fields that changed)."""
    cursor.execute(LOCK_FANOUT, {"execution": execution_id, "vertex": vertex})
    fan = _row(cursor)
    if fan is None:
        raise FanOutNotFound(vertex)
    changes: dict[str, list[Any]] = {}
    limit = fan["max_concurrency"] if max_concurrency is UNSET else max_concurrency
    free, release_cursor = fan["free_slots"], fan["release_cursor"]
    if limit != fan["max_concurrency"]:
        changes["maxConcurrency"] = [fan["max_concurrency"], limit]
        if fan["max_concurrency"] is None:  # no child is held: the running ones take the slots
            cursor.execute(UNFINISHED_RELEASED, {"execution": execution_id, "vertex": vertex,
                                                 "held_until": records.HELD_UNTIL})
            free = limit - int(cursor.fetchone()[0])
            release_cursor = max(release_cursor, fan["cursor"])
        elif limit is not None:
            free += limit - fan["max_concurrency"]
    if fan["min_successful"] is not None and (max_failure_ratio is not UNSET or max_failures is not UNSET):
        raise QuorumTolerance(fan["min_successful"])
    ratio = fan["max_failure_ratio"] if max_failure_ratio is UNSET else max_failure_ratio
    count = fan["max_failures"] if max_failures is UNSET else max_failures
    if ratio != fan["max_failure_ratio"]:
        changes["maxFailureRatio"] = [fan["max_failure_ratio"], ratio]
    if count != fan["max_failures"]:
        changes["maxFailures"] = [fan["max_failures"], count]
    if not changes:
        return fan, changes
    # Release what the new limit allows (all held children when there is none) before writing it.
    want = fan["total"] if limit is None else free
    if want > 0 and "maxConcurrency" in changes:
        released = records.release_held_steps(cursor, [(execution_id, vertex, release_cursor, want)])
        if (execution_id, vertex) in released:
            n, last = released[(execution_id, vertex)]
            free, release_cursor = (free if limit is None else free - n), max(release_cursor, last + 1)
    cursor.execute(APPLY, {"max_concurrency": limit, "free_slots": free if limit is not None else 0,
                           "release_cursor": release_cursor, "ratio": ratio, "max_failures": count,
                           "allowed": allowed_failures(ratio, fan["total"], count), "step": fan["step_id"]})
    fan = _row(cursor) or fan
    cursor.execute(RECORD, {"step": fan["step_id"], "actor": actor, "changes": json.dumps(changes)})
    state.note(cursor, [(execution_id, fan["step_id"], vertex, None,
                         f"fan-out edited by {actor or 'someone'}: {describe(changes)}")])
    reevaluate_merge_after_edit(cursor, fan)
    return fan, changes


def reevaluate_merge_after_edit(cursor: Any, fan: dict[str, Any]) -> bool:
    """An edited fan-out's MERGE decides now if the new tolerance decides it (a WAITING merge
    is woken and runs: it succeeds, or fails under failFast); returns whether it was woken."""
    if not (fan["decided"] and fan["merge_vertex"]):
        return False
    return state.wake_decided_merges(cursor, [fan])


def describe(changes: dict[str, list[Any]]) -> str:
    """``maxConcurrency 50 → 10, maxFailures none → 3``."""
    def shown(value: Any) -> str:
        return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    return ", ".join(f"{field} {shown(before)} → {shown(after)}" for field, (before, after) in changes.items())
