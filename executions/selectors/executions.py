"""Reads of executions: one execution, the list pages (keyset pages for the API, numbered
pages for the UI), lineage and chain links, the API's detail, a progress line for a terminal.

Every list is ``WHERE workspace = … ORDER BY`` an index (see executions/models.py) with one
extra row to say whether a next page exists, never an unbounded COUNT(*) (the UI's total is
counted up to 10,000). Ancestors are one recursive
query however deep the execution is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from executions.models import Execution, Step
from executions.selectors import fanouts, pauses, payloads, steps, waits
from workflows.errors import NotFound
from workflows.models import Workspace

PAGE_SIZE = 50  # rows of a UI page


def get(workspace: Workspace, execution_id: Any, *, with_counts: bool = False) -> Execution:
    """One execution of ``workspace`` with its workflow and version (and, ``with_counts``,
    its children's ``counts`` as the API shows them); NotFound otherwise, a malformed id
    included."""
    try:
        found = Execution.objects.select_related("workflow", "version").get(workspace=workspace, pk=execution_id)
    except (Execution.DoesNotExist, ValueError, ValidationError) as error:
        raise NotFound(f"no execution {execution_id}") from error
    return fanouts.with_counts([found])[0] if with_counts else found


# --- keyset pages (API) -------------------------------------------------------------------------

# Rows older than the cursor (created_at, id): a row comparison, which PostgreSQL answers from
# the composite index (an OR of column comparisons it would not).
OLDER_THAN = "(executions_execution.created_at, executions_execution.id) < (%s, %s)"


def page(workspace: Workspace, *, status: str | None, workflow: str | None, parent: uuid.UUID | None,
         top_level: bool | None, after: tuple[datetime, uuid.UUID] | None, limit: int,
         waiting: str | None = None, tags: list[dict[str, str]] | None = None) -> list[Execution]:
    """Up to ``limit + 1`` executions, newest first (the ``execution_ws_created`` /
    ``execution_ws_status`` indexes), with their children's ``counts``; ``waiting``: only
    those with a step waiting for a callback, an event, or either (``any``); ``tags``: only
    those whose tags contain each of ``tags`` (workflows/tags.search: containments on the
    ``execution_tags`` index)."""
    return fanouts.with_counts(list(page_rows(workspace, status=status, workflow=workflow, parent=parent,
                                              top_level=top_level, after=after, limit=limit, waiting=waiting,
                                              tags=tags)))


def page_rows(workspace: Workspace, *, status: str | None, workflow: str | None, parent: uuid.UUID | None,
              top_level: bool | None, after: tuple[datetime, uuid.UUID] | None, limit: int,
              waiting: str | None = None, tags: list[dict[str, str]] | None = None) -> QuerySet[Execution]:
    """``page``'s query (tests/integration/test_keys_plans.py reads its plan)."""
    rows = Execution.objects.select_related("workflow", "version").filter(workspace=workspace)
    for contained in tags or []:
        rows = rows.filter(tags__contains=contained)
    if waiting:
        rows = rows.filter(id__in=waits.executions_waiting(workspace.pk, waiting))
    if status:
        rows = rows.filter(status=status)
    if workflow:
        rows = rows.filter(workflow__key=workflow)
    if parent:
        rows = rows.filter(parent_id=parent)
    if top_level is not None:
        rows = rows.filter(parent__isnull=top_level)
    if after:
        older = RawSQL(OLDER_THAN, list(after), output_field=BooleanField())  # noqa: S611 - named constant SQL
        rows = rows.filter(older)
    return rows.order_by("-created_at", "-id")[: limit + 1]


def page_key(execution: Execution) -> tuple[datetime, uuid.UUID]:
    """The cursor after ``execution`` in ``page``."""
    return (execution.created_at, execution.id)


# --- numbered pages (UI) ------------------------------------------------------------------------

LIST_FIELDS = ("id", "status", "attempt", "created_at", "started_at", "attempt_started_at", "finished_at",
               "idempotency_key", "parent_id", "item_index", "spawn_vertex", "workflow__key", "version__hash",
               "tags", "item_key")


@dataclass(frozen=True)
class ListFilters:
    status: str = ""
    workflow: str = ""
    top_level_only: bool = True
    since: datetime | None = None
    until: datetime | None = None
    search: str = ""
    page: int = 1
    waiting: str = ""  # callback, event, any: only executions with a step waiting for it
    tags: list[dict[str, str]] = field(default_factory=list)  # workflows/tags.search: all must hold


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    page: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.page > 1


def listing(workspace: Workspace, filters: ListFilters, search_id: Any = None) -> Page:
    """Newest first, ``PAGE_SIZE`` a page, without a COUNT(*) (one extra row says whether a
    next page exists). An id search ignores the other filters: the id names one execution."""
    rows = matching(workspace, filters, search_id)
    rows = rows.select_related("workflow", "version").only(*LIST_FIELDS).order_by("-created_at", "-id")
    offset = (filters.page - 1) * PAGE_SIZE
    found = list(rows[offset: offset + PAGE_SIZE + 1])
    return Page(found[:PAGE_SIZE], filters.page, len(found) > PAGE_SIZE)


def matching(workspace: Workspace, filters: ListFilters, search_id: Any = None) -> QuerySet[Execution]:
    """The executions ``listing`` pages through (unordered)."""
    rows = Execution.objects.filter(workspace=workspace)
    if search_id is not None:
        return rows.filter(id=search_id)
    if filters.search:
        return rows.filter(idempotency_key=filters.search)  # the unique (workspace, key) index
    rows = _filtered(rows, filters)
    if filters.waiting:
        rows = rows.filter(id__in=waits.executions_waiting(workspace.pk, filters.waiting))
    return rows


COUNT_CAP = 10_000  # the list says "10,000+" beyond: counting further would read every row


def count(workspace: Workspace, filters: ListFilters, search_id: Any = None, *, cap: int = COUNT_CAP) -> int:
    """How many executions ``listing`` pages through, counted up to ``cap + 1`` (a bounded
    read over the same index as the page; ``> cap`` means "more than cap")."""
    return matching(workspace, filters, search_id).values("id")[: cap + 1].count()


def _filtered(rows: QuerySet[Execution], filters: ListFilters) -> QuerySet[Execution]:
    if filters.top_level_only:
        rows = rows.filter(parent__isnull=True)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.workflow:
        rows = rows.filter(workflow__key=filters.workflow)
    if filters.since:
        rows = rows.filter(created_at__gte=filters.since)
    if filters.until:
        rows = rows.filter(created_at__lt=filters.until)
    for contained in filters.tags:  # the execution_tags index (issue 31 §4)
        rows = rows.filter(tags__contains=contained)
    return rows


# --- lineage ------------------------------------------------------------------------------------

# The ancestors of one execution (the parameter) — its parent (level 1), the parent's parent (2) … up to the
# root — walked in one recursive query over primary-key lookups.
ANCESTORS = """
    WITH RECURSIVE up(id, parent_id, status, level) AS (
        SELECT p.id, p.parent_id, p.status, 1
        FROM executions_execution e JOIN executions_execution p ON p.id = e.parent_id
        WHERE e.id = %s
        UNION ALL
        SELECT p.id, p.parent_id, p.status, up.level + 1
        FROM up JOIN executions_execution p ON p.id = up.parent_id
    )
"""

# The ids of every ancestor.
ANCESTOR_IDS = f"{ANCESTORS} SELECT id FROM up"  # noqa: S608 - constant SQL only

# The nearest cancelled ancestor, if any.
CANCELLED_ANCESTOR = f"{ANCESTORS} SELECT id FROM up WHERE status = 'CANCELLED' ORDER BY level LIMIT 1"  # noqa: S608 - constant SQL only


def ancestors(execution_id: Any) -> list[Execution]:
    """The execution's ancestors from the root down to its parent, with their workflows:
    one query, however deep."""
    ids = RawSQL(ANCESTOR_IDS, [execution_id])  # noqa: S611 - named constant SQL, the id is a parameter
    rows = Execution.objects.select_related("workflow").filter(id__in=ids)
    by_id = {row.pk: row for row in rows}
    child = {row.parent_id: row for row in by_id.values()}
    chain, current = [], child.get(None)  # the root has no parent
    while current is not None:
        chain.append(current)
        current = child.get(current.pk)
    return chain


def lineage(execution: Execution) -> list[Execution]:
    """``ancestors`` of an execution at hand (no query for a top-level one)."""
    return [] if execution.parent_id is None else ancestors(execution.pk)


def cancelled_ancestor(execution_id: Any) -> uuid.UUID | None:
    """The id of the nearest cancelled ancestor of the execution (not the execution itself),
    or None: one query, however deep."""
    with connection.cursor() as cursor:
        cursor.execute(CANCELLED_ANCESTOR, [execution_id])
        row = cursor.fetchone()
    return row[0] if row else None


# --- chain links --------------------------------------------------------------------------------

def chained_to(execution: Execution) -> list[Execution]:
    """Up to 20 executions this one started with a CHAIN vertex (the partial chained_from index)."""
    return list(Execution.objects.filter(chained_from=execution).only("id", "status", "created_at")
                .order_by("created_at")[:20])


def chained_from(execution: Execution) -> Execution | None:
    if execution.chained_from_id is None:
        return None
    return Execution.objects.filter(pk=execution.chained_from_id).only("id", "status").first()


# --- the API's detail ---------------------------------------------------------------------------

@dataclass
class Detail:
    lineage: list[Execution]
    steps: list[Step]
    fanouts: list[fanouts.FanOutView]
    input: payloads.Inline
    output: payloads.Inline
    payloads_purged_at: Any = None
    pause: Any = None  # pauses.PauseState (issue 31)
    fanout_edits: list[dict[str, Any]] = field(default_factory=list)  # every fan-out's live edits, oldest first


def payloads_purged_at(execution: Execution) -> Any:
    """When data retention began to delete the payloads of ``execution``'s tree (S19: stamped
    on its root), or None."""
    root = execution.root_id or execution.pk
    return Execution.objects.filter(pk=root).values_list("payloads_purged_at", flat=True).first()


def with_detail(execution: Execution) -> Execution:
    """Set ``detail`` (lineage, steps, fan-outs with their merge verdicts, input and output —
    each inlined up to 64 KB, else previewed) on ``execution``, for the API's detail serializer."""
    execution.detail = Detail(  # type: ignore[attr-defined] # read by the serializer
        lineage=lineage(execution), steps=steps.of(execution), fanouts=fanouts.of(execution),
        input=payloads.inline(execution.pk, payloads.store.INPUT),
        output=payloads.inline(execution.pk, execution.output_vertex),
        payloads_purged_at=payloads_purged_at(execution), pause=pauses.of_execution(execution),
        fanout_edits=[{"spawner_vertex": vertex, **e} for vertex, found in pauses.fanout_edits(execution).items()
                      for e in found])
    return execution


def progress_line(execution: Execution) -> str:
    """One line for a terminal: status, unfinished steps, fan-out progress."""
    parts = [f"{execution.status}"]
    for step in steps.of(execution):
        if step.status != "SUCCEEDED":
            extra = f" ({step.wait_reason})" if step.wait_reason else ""
            parts.append(f"{step.vertex}:{step.status}{extra}")
    for view in fanouts.of(execution):
        parts.append(f"{view.spawner_vertex}: {view.done:,}/{view.total:,} done "
                     f"({view.succeeded:,} ok, {view.failed:,} failed)")
    return " | ".join(parts)


# What decides which panels the execution view shows (its fan-outs, the input and its size,
# whether the tree's payloads were purged): compared at every poll of the view's body, so it
# is one small read, never the panels themselves.
STRUCTURE = """
    SELECT (SELECT string_agg(f.spawner_vertex, ',') FROM executions_fanout f WHERE f.execution_id = e.id),
           (SELECT p.size_bytes FROM executions_payload p WHERE p.execution_id = e.id AND p.name = %(input)s),
           (SELECT r.payloads_purged_at FROM executions_execution r WHERE r.id = coalesce(e.root_id, e.id))
    FROM executions_execution e WHERE e.id = %(id)s
"""


def structure_key(execution: Execution, spawners: Iterable[str], input_size: int | None, purged_at: Any) -> str:
    """What the execution view's panels are (not what they show): it changes when a fan-out
    starts, the execution's status or attempt changes (a retry, an edited input), or the
    payloads are purged. The page builds it from what it read; a poll reads it (``structure``)."""
    return repr((sorted(spawners), input_size, purged_at, execution.status, execution.attempt))


def structure(execution: Execution) -> str:
    """``structure_key`` of ``execution``, in one small read."""
    with connection.cursor() as cursor:
        cursor.execute(STRUCTURE, {"id": execution.pk, "input": payloads.store.INPUT})
        spawners, input_size, purged_at = cursor.fetchone()
    return structure_key(execution, spawners.split(",") if spawners else [], input_size, purged_at)


def has_active_children(execution: Execution) -> bool:
    """Whether some child of ``execution`` is still pending or running (a finished parent
    whose tolerated failures are being retried: its merge output will change)."""
    return Execution.objects.filter(parent=execution, status__in=["PENDING", "RUNNING"]).exists()
