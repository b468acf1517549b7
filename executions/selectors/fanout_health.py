"""Fan-out health for a page of executions (the execution list's mini bars): the FanOut
counters summed per parent, in one query over ``executions_fanout`` — never the children
themselves, so a row costs the same for 10 or 100,000 children.

Unfinished children are ``created`` minus those that ended (the counters move in the
transaction of each child's transition, state.py); the merge's verdicts are the rule's own
SQL (merge_rule.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from executions.core.merge_rule import FANOUT_EXCEEDED

# Per parent: its fan-outs' counters summed, the failures the merges tolerate, and whether
# some merge's tolerance is exceeded.
HEALTH = f"""
    SELECT f.execution_id, sum(f.total), sum(f.created), sum(f.succeeded), sum(f.failed), sum(f.cancelled),
           sum(CASE WHEN f.tolerates_failed THEN f.failed ELSE 0 END),
           sum(CASE WHEN f.tolerates_cancelled THEN f.cancelled ELSE 0 END),
           bool_or({FANOUT_EXCEEDED})
    FROM executions_fanout f
    WHERE f.execution_id = ANY(%(parents)s)
    GROUP BY f.execution_id
"""  # noqa: S608 - the merge rule's constant expression only


@dataclass(frozen=True)
class Health:
    """The children of one parent by state, from its fan-outs' counters."""

    total: int
    created: int
    succeeded: int
    failed: int
    cancelled: int
    failed_tolerated: int
    cancelled_tolerated: int
    exceeded: bool

    @property
    def unfinished(self) -> int:
        return self.created - self.succeeded - self.failed - self.cancelled

    @property
    def never_started(self) -> int:
        return self.total - self.created


def of(parents: Iterable[uuid.UUID]) -> dict[uuid.UUID, Health]:
    """``Health`` of each of ``parents`` that has a fan-out (one query for the whole page)."""
    ids = list(parents)
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(HEALTH, {"parents": ids})
        rows = cursor.fetchall()
    return {row[0]: Health(total=int(row[1]), created=int(row[2]), succeeded=int(row[3]), failed=int(row[4]),
                           cancelled=int(row[5]), failed_tolerated=int(row[6]), cancelled_tolerated=int(row[7]),
                           exceeded=bool(row[8]))
            for row in rows}
