"""Reads only the API needs: keyset pages, fan-out counts for a page of executions at once,
and the parts of one execution's detail.

Every list is ``WHERE workspace = … AND (sort key) > cursor ORDER BY sort key LIMIT n+1``
over an index (see executions/models.py); a page of executions costs two extra queries for
its fan-out counts, however many rows it has.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from executions import selectors
from executions.models import Destination, Event, Execution, FanOut, Step
from workflows.errors import NotFound
from workflows.models import WorkflowDefinition, WorkflowVersion, Workspace

STATUSES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "NEVER_STARTED")
VERSIONS_SHOWN = 100


def _after(sql: str, params: list[Any]) -> RawSQL:
    """A row comparison, which PostgreSQL answers from a composite index (an OR of column
    comparisons it would not)."""
    return RawSQL(sql, params, output_field=BooleanField())  # noqa: S611 - constant SQL, values are parameters


# --- executions ---------------------------------------------------------------------------------

def _executions() -> QuerySet[Execution]:
    return Execution.objects.select_related("workflow", "version")


def executions_page(workspace: Workspace, *, status: str | None, workflow: str | None, parent: uuid.UUID | None,
                    top_level: bool | None, after: tuple[datetime, uuid.UUID] | None, limit: int) -> list[Execution]:
    """Newest first (the ``execution_ws_created`` / ``execution_ws_status`` indexes)."""
    rows = _executions().filter(workspace=workspace)
    if status:
        rows = rows.filter(status=status)
    if workflow:
        rows = rows.filter(workflow__key=workflow)
    if parent:
        rows = rows.filter(parent_id=parent)
    if top_level is not None:
        rows = rows.filter(parent__isnull=top_level)
    if after:
        rows = rows.filter(_after("(executions_execution.created_at, executions_execution.id) < (%s, %s)",
                                  list(after)))
    return with_counts(list(rows.order_by("-created_at", "-id")[: limit + 1]))


def execution_key(execution: Execution) -> tuple[datetime, uuid.UUID]:
    return (execution.created_at, execution.id)


def children_page(parent: Execution, *, status: str | None, spawner: str | None,
                  after: tuple[str, int] | None, limit: int) -> list[Execution]:
    """In item order (the ``execution_unique_child_key`` index)."""
    rows = _executions().filter(parent=parent, item_index__isnull=False)
    if status:
        rows = rows.filter(status=status)
    if spawner:
        rows = rows.filter(spawn_vertex=spawner)
    if after:
        rows = rows.filter(_after("(executions_execution.spawn_vertex, executions_execution.item_index) > (%s, %s)",
                                  list(after)))
    return with_counts(list(rows.order_by("spawn_vertex", "item_index")[: limit + 1]))


def child_key(execution: Execution) -> tuple[str | None, int | None]:
    return (execution.spawn_vertex, execution.item_index)


ACTIVE_CHILDREN = """
    SELECT parent_id, status, count(*) FROM executions_execution
    WHERE parent_id = ANY(%(parents)s) AND status IN ('PENDING', 'RUNNING')
    GROUP BY parent_id, status
"""


def with_counts(executions: list[Execution]) -> list[Execution]:
    """Set ``counts`` (status → children, summed over its fan-outs) on each execution that
    spawned children, None on the others."""
    totals: dict[uuid.UUID, dict[str, int]] = {}
    for fan in FanOut.objects.filter(execution_id__in=[e.pk for e in executions]):
        counts = totals.setdefault(fan.execution_id, dict.fromkeys(STATUSES, 0))
        counts["SUCCEEDED"] += fan.succeeded
        counts["FAILED"] += fan.failed
        counts["CANCELLED"] += fan.cancelled
        counts["NEVER_STARTED"] += fan.total - fan.created
    if totals:
        with connection.cursor() as cursor:
            cursor.execute(ACTIVE_CHILDREN, {"parents": list(totals)})
            for parent_id, status, n in cursor.fetchall():
                totals[parent_id][status] += n
    for execution in executions:
        execution.counts = totals.get(execution.pk)  # type: ignore[attr-defined] # read by the serializer
    return executions


def execution(workspace: Workspace, execution_id: uuid.UUID) -> Execution:
    found = _executions().filter(workspace=workspace, pk=execution_id).first()
    if found is None:
        raise NotFound(f"no execution {execution_id}")
    return with_counts([found])[0]


@dataclass
class Detail:
    lineage: list[Execution]
    steps: list[Step]
    fanouts: list[selectors.FanOutView]
    input: Any
    output: Any


def with_detail(execution: Execution) -> Execution:
    """Set ``detail`` (lineage, steps, fan-outs with their merge state, input and output)."""
    lineage = selectors.lineage(execution)
    for ancestor in lineage:
        ancestor.workflow  # noqa: B018 - loaded here, not lazily per field while rendering
    execution.detail = Detail(  # type: ignore[attr-defined] # read by the serializer
        lineage=lineage, steps=selectors.steps(execution), fanouts=selectors.fanouts(execution),
        input=selectors.input_of(execution), output=selectors.output_of(execution))
    return execution


def events_page(execution: Execution, *, after: int | None, limit: int) -> list[Event]:
    return list(Event.objects.filter(execution_id=execution.pk, id__gt=after or 0).order_by("id")[: limit + 1])


# --- workflows ----------------------------------------------------------------------------------

def definitions_page(workspace: Workspace, *, after: str | None, limit: int) -> list[WorkflowDefinition]:
    rows = WorkflowDefinition.objects.filter(workspace=workspace).select_related("current_version")
    if after is not None:
        rows = rows.filter(key__gt=after)
    return list(rows.order_by("key")[: limit + 1])


def definition(workspace: Workspace, key: str) -> WorkflowDefinition:
    """A definition with its newest versions in ``recent_versions`` and ``version_count``."""
    found = WorkflowDefinition.objects.filter(workspace=workspace, key=key).select_related("current_version").first()
    if found is None:
        raise NotFound(f"no workflow '{key}' in this workspace")
    versions = WorkflowVersion.objects.filter(definition=found).order_by("-created_at", "-id")
    # Attributes read by the serializer (the model has no such fields).
    found.recent_versions = list(versions.defer("canonical", "dsl")[:VERSIONS_SHOWN])  # type: ignore[attr-defined]
    found.version_count = versions.count()  # type: ignore[attr-defined]
    return found


@dataclass
class VersionView:
    """One content hash: the same logic may be published under several keys."""

    hash: str
    workflows: list[str]
    author: str
    created_at: datetime
    dsl: Any


def version(workspace: Workspace, digest: str) -> VersionView:
    rows = list(WorkflowVersion.objects.filter(definition__workspace=workspace, hash=digest)
                .select_related("definition").order_by("created_at", "id"))
    if not rows:
        raise NotFound(f"no version {digest} in this workspace")
    first = rows[0]
    return VersionView(hash=digest, workflows=[row.definition.key for row in rows], author=first.author,
                       created_at=first.created_at, dsl=first.dsl)


# --- destinations -------------------------------------------------------------------------------

def destinations_page(workspace: Workspace, *, after: str | None, limit: int) -> list[Destination]:
    rows = Destination.objects.filter(workspace=workspace)
    if after is not None:
        rows = rows.filter(name__gt=after)
    return list(rows.order_by("name")[: limit + 1])


def destination(workspace: Workspace, name: str) -> Destination:
    found = Destination.objects.filter(workspace=workspace, name=name).first()
    if found is None:
        raise NotFound(f"no destination '{name}' in this workspace")
    return found
