"""Execution quotas (S6): a workspace's plan allows N executions per UTC day. A reservation
is one guarded UPDATE, so two concurrent fan-outs cannot both pass on the same remainder."""

from __future__ import annotations

from typing import Any

ENSURE_ROW = """
    INSERT INTO executions_quotausage (workspace_id, day, used)
    VALUES (%(workspace)s, (now() AT TIME ZONE 'UTC')::date, 0)
    ON CONFLICT (workspace_id, day) DO NOTHING
"""

RESERVE = """
    UPDATE executions_quotausage q SET used = q.used + %(n)s
    FROM workflows_workspace w JOIN workflows_plan p ON p.id = w.plan_id
    WHERE q.workspace_id = %(workspace)s AND w.id = q.workspace_id
      AND q.day = (now() AT TIME ZONE 'UTC')::date
      AND q.used + %(n)s <= p.executions_per_day
    RETURNING q.used
"""

REMAINING = """
    SELECT p.executions_per_day - coalesce(q.used, 0)
    FROM workflows_workspace w JOIN workflows_plan p ON p.id = w.plan_id
    LEFT JOIN executions_quotausage q ON q.workspace_id = w.id AND q.day = (now() AT TIME ZONE 'UTC')::date
    WHERE w.id = %(workspace)s
"""


class QuotaExceeded(Exception):
    def __init__(self, needed: int, remaining: int) -> None:
        super().__init__(f"quota exceeded: needs {needed:,}, remaining {max(remaining, 0):,}")
        self.needed, self.remaining = needed, remaining


def reserve(cursor: Any, workspace_id: int, n: int) -> None:
    """Reserve ``n`` executions of today's quota or raise QuotaExceeded (reserves nothing)."""
    if n <= 0:
        return
    cursor.execute(ENSURE_ROW, {"workspace": workspace_id})
    cursor.execute(RESERVE, {"workspace": workspace_id, "n": n})
    if cursor.fetchone() is None:
        raise QuotaExceeded(n, remaining(cursor, workspace_id))


def remaining(cursor: Any, workspace_id: int) -> int:
    cursor.execute(REMAINING, {"workspace": workspace_id})
    row = cursor.fetchone()
    return int(row[0]) if row else 0
