"""An execution tree's priority (issue 30): one value for the root and every descendant,
copied onto their open steps, where the fair claim reads it (fairness.py)."""

from __future__ import annotations

import uuid
from typing import Any

from executions.core.records import PRIORITIES

# The tree by its index (execution_root_tree), its open steps by (execution, vertex). Steps
# that ended keep theirs: a retry of one is claimed with the tree's priority of that time.
SET_TREE_PRIORITY = """
    WITH tree AS (
        UPDATE executions_execution e SET priority = %(priority)s WHERE e.root_id = %(root)s RETURNING e.id
    )
    UPDATE executions_step s SET priority = %(priority)s
    FROM tree WHERE s.execution_id = tree.id AND s.status IN ('READY', 'RUNNING', 'WAITING')
"""


def problem(value: Any) -> str | None:
    """Why ``value`` is not a priority (None: it is one)."""
    # A JSON number with an integral value is an integer (1.0 is 1), as for destinations' limits.
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not integral or int(value) not in PRIORITIES:
        return f"must be an integer from {PRIORITIES.start} (first) to {PRIORITIES.stop - 1}"
    return None


def set_tree_priority(cursor: Any, root_id: uuid.UUID, priority: int) -> None:
    """Give the tree of ``root_id`` (every execution and open step) ``priority``."""
    cursor.execute(SET_TREE_PRIORITY, {"root": root_id, "priority": priority})
