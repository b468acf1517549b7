"""What is paused and how far it has drained (issue 31, S24), and a fan-out's edit history.

``in_flight`` counts the RUNNING steps of a subtree (or a workspace): it starts from the
RUNNING steps (a partial index, as many as the workers run), never from the tree's rows, so
it costs the same at a million children."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from executions.core import pauses
from executions.models import Execution, FanOutEdit
from workflows.models import Workspace

# RUNNING steps in the subtree of %(execution)s (of root %(root)s): those of its tree whose
# execution is it or has it among its ancestors.
IN_FLIGHT = """
    SELECT count(*) FROM executions_step s JOIN executions_execution e ON e.id = s.execution_id
    WHERE s.status = 'RUNNING' AND e.root_id = %(root)s
      AND (%(root)s = %(execution)s OR EXISTS (
          WITH RECURSIVE up AS (
              SELECT x.id, x.parent_id FROM executions_execution x WHERE x.id = e.id
              UNION ALL
              SELECT p.id, p.parent_id FROM executions_execution p JOIN up ON p.id = up.parent_id)
          SELECT 1 FROM up WHERE up.id = %(execution)s))
"""
# RUNNING steps of a workspace's executions.
IN_FLIGHT_WORKSPACE = """
    SELECT count(*) FROM executions_step s JOIN executions_execution e ON e.id = s.execution_id
    WHERE s.status = 'RUNNING' AND e.workspace_id = %(workspace)s
"""
# A workspace's pause.
WORKSPACE_PAUSE = "SELECT paused_at, paused_by FROM executions_pause WHERE workspace_id = %(workspace)s"


@dataclass(frozen=True)
class PauseState:
    """``paused``: held by a pause — its own (``scope`` "execution"), an ancestor's
    ("ancestor", ``paused_execution`` says which) or its workspace's ("workspace")."""

    paused: bool
    paused_at: datetime | None
    paused_by: str
    scope: str | None
    paused_execution: uuid.UUID | None
    in_flight: int

    @property
    def drained(self) -> bool:
        return self.paused and self.in_flight == 0


# One round trip for the execution view's header: the pause that holds it (none: no row, and
# nothing else is read) and, only then, its steps in flight. An empty pause table answers at once.
STATE = f"""
    SELECT h.*, ({IN_FLIGHT}) AS in_flight
    FROM ({pauses.HOLDING}) h
    WHERE EXISTS (SELECT 1 FROM executions_pause)
"""  # noqa: S608 - constant SQL


def of_execution(execution: Execution, *, count: bool = True) -> PauseState:
    """Held by a pause or not, and its steps in flight; with ``count=False`` (the UI's header,
    which shows them only while paused) they are counted only while it is paused (else 0)."""
    params = {"root": execution.root_id or execution.pk, "execution": execution.pk}
    with connection.cursor() as cursor:
        cursor.execute(STATE, params)
        row = cursor.fetchone()
        if row is None and count:
            cursor.execute(IN_FLIGHT, params)
            return PauseState(False, None, "", None, None, int(cursor.fetchone()[0]))
    if row is None:
        return PauseState(False, None, "", None, None, 0)
    paused_execution, workspace_id, paused_at, paused_by, in_flight = row
    scope = ("workspace" if workspace_id is not None
             else "execution" if paused_execution == execution.pk else "ancestor")
    return PauseState(True, paused_at, paused_by, scope, paused_execution, int(in_flight))


def of_workspace(workspace: Workspace) -> PauseState:
    with connection.cursor() as cursor:
        cursor.execute(WORKSPACE_PAUSE, {"workspace": workspace.pk})
        row = cursor.fetchone()
        cursor.execute(IN_FLIGHT_WORKSPACE, {"workspace": workspace.pk})
        in_flight = int(cursor.fetchone()[0])
    if row is None:
        return PauseState(False, None, "", None, None, in_flight)
    return PauseState(True, row[0], row[1], "workspace", None, in_flight)


def fanout_edits(execution: Execution) -> dict[str, list[dict[str, Any]]]:
    """Each fan-out's edits (by spawner vertex), oldest first."""
    edits: dict[str, list[dict[str, Any]]] = {}
    rows = (FanOutEdit.objects.filter(fanout__execution=execution).order_by("id")
            .values("fanout__spawner_vertex", "actor", "changes", "created_at"))
    for row in rows:
        edits.setdefault(row["fanout__spawner_vertex"], []).append(
            {"actor": row["actor"], "changes": row["changes"], "created_at": row["created_at"]})
    return edits
