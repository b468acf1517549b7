"""Pauses (issue 31, S24): "pause is a state, drained is a fact".

A paused execution's subtree, or a paused workspace, has a row in ``executions_pause``
(control_models.Pause); resume deletes it. While it is there no step of that subtree or
workspace is claimed: the claim statements carry ``NOT_PAUSED`` (the one place the rule is
written). Running steps finish and commit as usual; READY steps keep their due times (timers,
backoffs), so they run at them — or at once, if those passed — after the resume.

**The predicate** (``NOT_PAUSED``, formatted with the candidate step's alias) costs a claim
one look-up per statement while nothing is paused (the uncorrelated ``EXISTS`` is a one-time
InitPlan and OR evaluates its arguments in order), and otherwise one primary-key look-up of
the step's execution per candidate, plus — only for a tree that holds a pause — a walk up its
ancestors (depth is small). The paused steps stay in the claim index: a claim walks past
those due before the first claimable one.

**The barrier**: a claim transaction takes ``CLAIM_BARRIER`` (a shared advisory lock) before
its claim statements, and a pause takes it exclusively in the transaction that inserts its row.
So a claim either ended before the pause returns, or takes its snapshot after the pause row
committed: once a pause returns, nothing of it is claimed (the fault test kills a worker
mid-spawn to show it). Destinations need no barrier: their pause is an update of a row the
claim locks (flow.CALLABLE, flow.EFFECTIVE read ``paused``).
"""

from __future__ import annotations

import uuid
from typing import Any

from executions.platform import notify

PAUSE_LOCK_CLASS = 7_318_031  # pg_locks.classid of the claim barrier (others: kick.py, cancel.py, waits.py)

CLAIM_BARRIER = f"SELECT pg_advisory_xact_lock_shared({PAUSE_LOCK_CLASS}, 0)"
PAUSE_BARRIER = f"SELECT pg_advisory_xact_lock({PAUSE_LOCK_CLASS}, 0)"

# THE pause rule of a claim: the step ``{s}`` is of no paused subtree and no paused workspace.
# The walk up a tree (``up``) goes on only while the tree holds a pause (pause_root index).
NOT_PAUSED = """(NOT EXISTS (SELECT 1 FROM executions_pause)
       OR NOT EXISTS (
           WITH RECURSIVE up AS (
               SELECT pe.id, pe.parent_id, pe.root_id, pe.workspace_id FROM executions_execution pe
               WHERE pe.id = {s}.execution_id
               UNION ALL
               SELECT pe.id, pe.parent_id, pe.root_id, pe.workspace_id
               FROM executions_execution pe JOIN up ON pe.id = up.parent_id
               WHERE EXISTS (SELECT 1 FROM executions_pause pr WHERE pr.root_id = up.root_id))
           SELECT 1 FROM up JOIN executions_pause pp
           ON pp.execution_id = up.id OR pp.workspace_id = up.workspace_id))"""


def not_paused(alias: str) -> str:
    """``NOT_PAUSED`` for the step alias ``alias`` (a constant fragment for constant SQL)."""
    return NOT_PAUSED.replace("{s}", alias)


# As the claim statements use it (fairness._TAKEABLE as not_paused("s"), leases.CLAIM_DESTINATION; the idle
# drain's NEXT_DUE and WORK_PENDING): their candidate is ``executions_step``, unaliased.
CLAIMABLE_STEP = not_paused("executions_step")
# The idle drain's question about a destination step (the claim reads flow.CALLABLE instead).
DESTINATION_NOT_PAUSED = """NOT EXISTS (SELECT 1 FROM executions_destination pd
                                  WHERE pd.id = executions_step.destination_id AND pd.paused)"""


PAUSE_EXECUTION = """
    INSERT INTO executions_pause (execution_id, root_id, workspace_id, paused_by, paused_at)
    VALUES (%(execution)s, %(root)s, NULL, %(actor)s, now())
    ON CONFLICT (execution_id) DO NOTHING
"""
PAUSE_WORKSPACE = """
    INSERT INTO executions_pause (execution_id, root_id, workspace_id, paused_by, paused_at)
    VALUES (NULL, NULL, %(workspace)s, %(actor)s, now())
    ON CONFLICT (workspace_id) DO NOTHING
"""
RESUME_EXECUTION = "DELETE FROM executions_pause WHERE execution_id = %(execution)s"
RESUME_WORKSPACE = "DELETE FROM executions_pause WHERE workspace_id = %(workspace)s"

# The pause that holds an execution: its own, an ancestor's, or its workspace's (first: its own).
HOLDING = """
    WITH RECURSIVE up AS (
        SELECT e.id, e.parent_id, e.workspace_id, 0 AS n FROM executions_execution e WHERE e.id = %(execution)s
        UNION ALL
        SELECT e.id, e.parent_id, e.workspace_id, up.n + 1 FROM executions_execution e JOIN up ON e.id = up.parent_id
    )
    SELECT p.execution_id, p.workspace_id, p.paused_at, p.paused_by
    FROM up JOIN executions_pause p ON p.execution_id = up.id OR (up.n = 0 AND p.workspace_id = up.workspace_id)
    ORDER BY p.workspace_id IS NOT NULL, up.n
    LIMIT 1
"""


def pause_execution(cursor: Any, execution_id: uuid.UUID, root_id: uuid.UUID, actor: str) -> bool:
    """Pause the subtree of ``execution_id`` (behind the claim barrier); False if it was paused."""
    cursor.execute(PAUSE_BARRIER)
    cursor.execute(PAUSE_EXECUTION, {"execution": execution_id, "root": root_id, "actor": actor})
    return cursor.rowcount == 1


def resume_execution(cursor: Any, execution_id: uuid.UUID) -> bool:
    """Resume it; its due steps are claimable at once (a drain is woken). False: it was not paused."""
    cursor.execute(RESUME_EXECUTION, {"execution": execution_id})
    resumed = cursor.rowcount == 1
    if resumed:
        notify.work_created(cursor)
    return resumed


def pause_workspace(cursor: Any, workspace_id: int, actor: str) -> bool:
    cursor.execute(PAUSE_BARRIER)
    cursor.execute(PAUSE_WORKSPACE, {"workspace": workspace_id, "actor": actor})
    return cursor.rowcount == 1


def resume_workspace(cursor: Any, workspace_id: int) -> bool:
    cursor.execute(RESUME_WORKSPACE, {"workspace": workspace_id})
    resumed = cursor.rowcount == 1
    if resumed:
        notify.work_created(cursor)
    return resumed


def holding(cursor: Any, execution_id: uuid.UUID) -> dict[str, Any] | None:
    """The pause that holds ``execution_id`` (own, an ancestor's, its workspace's), or None."""
    cursor.execute(HOLDING, {"execution": execution_id})
    row = cursor.fetchone()
    if row is None:
        return None
    return {"execution_id": row[0], "workspace_id": row[1], "paused_at": row[2], "paused_by": row[3]}


def tree_paused(cursor: Any, execution_id: uuid.UUID) -> bool:
    """Is ``execution_id`` held by a pause (the spawner asks before each batch)?"""
    cursor.execute("SELECT EXISTS (SELECT 1 FROM executions_pause)")
    return bool(cursor.fetchone()[0]) and holding(cursor, execution_id) is not None
