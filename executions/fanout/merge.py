"""MERGE (S10): join a spawner's children under the failure tolerance.

The FanOut row's counts move with every child's terminal transition (core/state.py). A MERGE
locks the row and decides from the counts alone, in O(1) (the rule: core/merge_rule.py): not
yet decided — it waits for its children's signal; exceeded — it fails (a failFast merge first
cancels the children still running, S18); otherwise it stores the children's outputs in item
order as its output and succeeds (a quorum merge reached first cancels the children still
running, S26, and its output lists the succeeded children only, with the counts of the rest).
"""

from __future__ import annotations

from typing import cast

from django.db import connection

from executions.core import cancel, payloads
from executions.core.merge_rule import explain, merge_counts, sweep_of
from executions.core.outcomes import NO_OUTPUT, Outcome, committed, failed, signal, succeeded
from executions.core.runs import StepRun
from executions.fanout.spawn import fanout_row
from executions.handlers import NonRetryable
from workflows.dsl import ast

LOCK_FANOUT = """
    SELECT f.step_id FROM executions_fanout f
    JOIN executions_step s ON s.id = f.step_id
    WHERE s.execution_id = %(execution)s AND s.vertex = %(spawner)s
    FOR UPDATE OF f
"""

SPAWNER_STEP = "SELECT id FROM executions_step WHERE execution_id = %(execution)s AND vertex = %(spawner)s"


def _stop_children_on_failfast(step: StepRun, vertex: ast.Merge) -> None:
    """A merge decided before every child finished (``stops``: a failFast merge that has
    failed, S18, or a quorum merge whose quorum was reached or lost, S26) cancels the children
    still running before it finishes — outside its fenced transaction, since a child's rows
    lock before the fan-out's (state.py). A merge re-run after a crash here simply sweeps
    again. Set-based: cancel.cancel_descendants, in bounded batches."""
    with connection.cursor() as cursor:
        cursor.execute(SPAWNER_STEP, {"execution": step.execution.id, "spawner": vertex.spawner})
        spawner_row = cursor.fetchone()
        fan = fanout_row(cursor, spawner_row[0]) if spawner_row else None
    if fan and fan["stops"] and not fan["finished"]:
        cause, message = sweep_of(fan, f"cancelled: failFast merge '{vertex.id}' failed")
        cancel.cancel_descendants(step.execution.id, spawner=vertex.spawner, cause=cause, message=message)


def merge(step: StepRun) -> Outcome:
    vertex = cast(ast.Merge, step.vertex)
    _stop_children_on_failfast(step, vertex)
    lock = (LOCK_FANOUT, {"execution": step.execution.id, "spawner": vertex.spawner})
    with step.transaction(prelock=lock) as tx:
        cursor = tx.cursor
        cursor.execute(SPAWNER_STEP, {"execution": step.execution.id, "spawner": vertex.spawner})
        spawner_row = cursor.fetchone()
        fan = fanout_row(cursor, spawner_row[0]) if spawner_row else None
        if fan is None:
            raise NonRetryable(f"SPAWNER '{vertex.spawner}' has not spawned in this execution")
        summary = explain(fan)
        if not fan["decided"]:
            tx.finish(signal(f"waiting for children: {summary}"))
        elif fan["exceeded"]:
            tx.finish(failed(f"merge failed: {summary}", retryable=False))
        else:
            payloads.put_merge_output(cursor, step.execution.id, vertex.id, spawner=vertex.spawner,
                                      counts=merge_counts(fan), total=fan["total"],
                                      succeeded_only=fan["min_successful"] is not None)
            tx.finish(succeeded(NO_OUTPUT, output_vertex=vertex.id))
    return committed()
