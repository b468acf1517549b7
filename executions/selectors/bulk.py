"""Reads of bulk operations (issue 31 §5): one operation with its progress and skipped
children, an execution's latest operations, and the error groups of a parent's failed
children (issue 33 §3) that a bulk retry can act on."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection

from executions.models import BulkOperation
from workflows.errors import NotFound
from workflows.models import Workspace

SKIPPED_SHOWN = 100

SKIPPED_REASONS = """
    SELECT reason, count(*) FROM executions_bulkitem
    WHERE operation_id = %(id)s AND outcome = 'skipped' GROUP BY reason ORDER BY count(*) DESC, reason
"""

SKIPPED_CHILDREN = """
    SELECT b.child, c.item_index, b.reason FROM executions_bulkitem b
    LEFT JOIN executions_execution c ON c.id = b.child
    WHERE b.operation_id = %(id)s AND b.outcome = 'skipped'
    ORDER BY b.position LIMIT %(limit)s
"""


def get(workspace: Workspace, operation_id: Any) -> dict[str, Any]:
    """One operation of ``workspace`` as the API shows it (``NotFound`` otherwise)."""
    try:
        operation = BulkOperation.objects.get(pk=operation_id, workspace=workspace)
    except (BulkOperation.DoesNotExist, ValueError) as error:
        raise NotFound(f"no operation {operation_id}") from error
    return progress(operation, skipped=True)


def progress(operation: BulkOperation, *, skipped: bool) -> dict[str, Any]:
    read = {"id": operation.pk, "execution": operation.execution_id, "action": operation.action,
            "filter": operation.filter, "state": operation.state, "matched": operation.matched,
            "done": operation.done, "skipped": operation.skipped,
            "pending": operation.matched - operation.done - operation.skipped,
            "created_by": operation.created_by, "created_at": operation.created_at,
            "finished_at": operation.finished_at, "skipped_reasons": {}, "skipped_children": []}
    if skipped and operation.skipped:
        with connection.cursor() as cursor:
            cursor.execute(SKIPPED_REASONS, {"id": operation.pk})
            read["skipped_reasons"] = dict(cursor.fetchall())
            cursor.execute(SKIPPED_CHILDREN, {"id": operation.pk, "limit": SKIPPED_SHOWN})
            read["skipped_children"] = [{"child": child, "item_index": index, "reason": reason}
                                        for child, index, reason in cursor.fetchall()]
    return read


def latest(execution_id: uuid.UUID, limit: int = 3) -> list[dict[str, Any]]:
    """The execution's latest operations, newest first, with their skipped reasons."""
    return [progress(operation, skipped=True)
            for operation in BulkOperation.objects.filter(execution_id=execution_id).order_by("-created_at")[:limit]]


# The groups of a parent's FAILED children by error signature, largest first, each with one
# example: an index-only walk of execution_failed_signature (parent, error_signature).
ERROR_GROUPS = """
    SELECT g.error_signature, g.n, x.id, x.item_index, left(x.error, 500)
    FROM (SELECT error_signature, count(*) AS n FROM executions_execution
          WHERE parent_id = %(parent)s AND status = 'FAILED'
          GROUP BY error_signature ORDER BY count(*) DESC, error_signature LIMIT %(limit)s) g
    CROSS JOIN LATERAL (SELECT id, item_index, error FROM executions_execution
                        WHERE parent_id = %(parent)s AND status = 'FAILED' AND error_signature = g.error_signature
                        LIMIT 1) x
    ORDER BY g.n DESC, g.error_signature
"""


def error_groups(parent: uuid.UUID, limit: int = 20) -> list[dict[str, Any]]:
    """The ``limit`` largest error groups of ``parent``'s failed children."""
    with connection.cursor() as cursor:
        cursor.execute(ERROR_GROUPS, {"parent": parent, "limit": limit})
        return [{"signature": signature, "count": count, "example": example, "example_index": index,
                 "example_error": error} for signature, count, example, index, error in cursor.fetchall()]
