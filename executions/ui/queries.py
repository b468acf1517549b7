"""Reads only the operator UI needs. Each is bounded and indexed, so a page over a
100,000-child fan-out costs the same few queries as one over ten children.

Shared reads (fan-out counts, lineage, steps, events) live in ``executions/selectors.py``;
these are the UI's own: list pages, payload outlines, the children table, the long tail in
fewer passes than the selector's, slot saturation for waiting steps, the Rate Limits rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, QuerySet
from django.db.models.functions import Substr

from executions.models import Destination, Execution
from workflows.models import WorkflowDefinition, Workspace

PAGE_SIZE = 50

# --- executions list --------------------------------------------------------------------------

LIST_FIELDS = ("id", "status", "attempt", "created_at", "started_at", "finished_at", "idempotency_key",
               "parent_id", "item_index", "spawn_vertex", "workflow__key", "version__hash")


@dataclass(frozen=True)
class ListFilters:
    status: str = ""
    workflow: str = ""
    top_level_only: bool = True
    since: datetime | None = None
    until: datetime | None = None
    search: str = ""
    page: int = 1


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    page: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.page > 1


def execution_list(workspace: Workspace, filters: ListFilters, search_id: Any = None) -> Page:
    """Newest first, ``PAGE_SIZE`` a page, without a COUNT(*) (one extra row says whether a
    next page exists). An id search ignores the other filters: the id names one execution."""
    rows = Execution.objects.filter(workspace=workspace)
    if search_id is not None:
        rows = rows.filter(id=search_id)
    elif filters.search:
        rows = rows.filter(idempotency_key=filters.search)  # the unique (workspace, key) index
    else:
        rows = _filtered(rows, filters)
    rows = rows.select_related("workflow", "version").only(*LIST_FIELDS).order_by("-created_at", "-id")
    offset = (filters.page - 1) * PAGE_SIZE
    found = list(rows[offset: offset + PAGE_SIZE + 1])
    return Page(found[:PAGE_SIZE], filters.page, len(found) > PAGE_SIZE)


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
    return rows


def workflow_keys(workspace: Workspace) -> list[str]:
    return list(WorkflowDefinition.objects.filter(workspace=workspace).order_by("key").values_list("key", flat=True))


def workflows(workspace: Workspace) -> list[WorkflowDefinition]:
    return list(WorkflowDefinition.objects.filter(workspace=workspace).select_related("current_version")
                .only("id", "key", "updated_at", "current_version__id", "current_version__hash",
                      "current_version__created_at", "current_version__author").order_by("key"))


# --- one execution ----------------------------------------------------------------------------

def chained_to(execution: Execution) -> list[Execution]:
    """Executions this one started with a CHAIN vertex (the partial chained_from index)."""
    return list(Execution.objects.filter(chained_from=execution).only("id", "status", "created_at")
                .order_by("created_at")[:20])


def chained_from(execution: Execution) -> Execution | None:
    if execution.chained_from_id is None:
        return None
    return Execution.objects.filter(pk=execution.chained_from_id).only("id", "status").first()


PREVIEW_BYTES = 16 * 1024  # payloads up to this size are fetched whole and shown as JSON
PREVIEW_CHARS = 3000

PAYLOAD_HEAD = """
    SELECT size_bytes, CASE WHEN size_bytes <= %(limit)s THEN data END
    FROM executions_payload WHERE execution_id = %(execution)s AND name = %(name)s
"""

# The shape of a large payload without shipping it: its top-level entries (a list or scalar
# payload is one entry with an empty key), each with its type, its length when it is a list,
# and the start of its first element or value.
PAYLOAD_OUTLINE = """
    SELECT e.key, jsonb_typeof(e.value),
           CASE jsonb_typeof(e.value) WHEN 'array' THEN jsonb_array_length(e.value) END,
           left(CASE jsonb_typeof(e.value) WHEN 'array' THEN (e.value -> 0)::text ELSE e.value::text END,
                %(chars)s)
    FROM executions_payload p,
         jsonb_each(CASE jsonb_typeof(p.data) WHEN 'object' THEN p.data ELSE jsonb_build_object('', p.data) END) e
    WHERE p.execution_id = %(execution)s AND p.name = %(name)s
    ORDER BY e.key LIMIT 25
"""


@dataclass(frozen=True)
class Preview:
    name: str
    size_bytes: int
    text: str
    truncated: bool  # the JSON text was cut
    outline: bool = False  # too large to show: its shape only


def payload_preview(execution_id: Any, name: str | None) -> Preview | None:
    """A bounded preview of a stored payload: small ones as pretty JSON, large ones as an
    outline (keys, list lengths, first elements), so a 100,000-item input is never sent."""
    if not name:
        return None
    with connection.cursor() as cursor:
        cursor.execute(PAYLOAD_HEAD, {"limit": PREVIEW_BYTES, "execution": execution_id, "name": name})
        head = cursor.fetchone()
        if head is None:
            return None
        size, data = head
        if size <= PREVIEW_BYTES:
            text = json.dumps(json.loads(data) if isinstance(data, str) else data, indent=2, ensure_ascii=False)
            return Preview(name, size, text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS)
        cursor.execute(PAYLOAD_OUTLINE, {"chars": 300, "execution": execution_id, "name": name})
        return Preview(name, size, _outline(cursor.fetchall()), truncated=False, outline=True)


def _outline(entries: list[tuple[str, str, int | None, str]]) -> str:
    lines = []
    for key, kind, length, sample in entries:
        value = f"[{sample}, … {length:,} items]" if kind == "array" and length else sample
        lines.append(value if key == "" else f"{json.dumps(key)}: {value}")
    if len(entries) == 1 and entries[0][0] == "":
        return lines[0]
    return "{\n  " + ",\n  ".join(lines) + "\n}"


# --- children of one spawner ------------------------------------------------------------------

CHILD_FIELDS = ("id", "status", "attempt", "item_index", "started_at", "finished_at")
SORTS = ("index", "duration")
# Sorting by duration is a top-N sort over every child (no index orders by a difference of
# two columns), so it lists the slowest DURATION_SORT_LIMIT only: pages deeper than that
# would pay for a full sort, and nobody pages through thousands of them by duration.
DURATION_SORT_LIMIT = 1000


def children(parent: Execution, spawner: str, *, status: str, sort: str, page: int, matching: int) -> list[Any]:
    """One page of a spawner's children (``matching`` = how many match, from the fan-out
    counters). Every page costs about the same, however deep:

    * by index, unfiltered: item indexes are 0…created-1 without gaps (children are created
      in cursor order, once each), so page p is an index range on the unique
      (parent, spawner, index) key;
    * by index with a status: the smaller of the offsets from either end;
    * by duration: a top-N sort, capped at ``DURATION_SORT_LIMIT``.
    """
    rows = Execution.objects.filter(parent=parent, spawn_vertex=spawner, item_index__isnull=False)
    rows = rows.only(*CHILD_FIELDS).annotate(error_snippet=Substr("error", 1, 200))
    offset = (page - 1) * PAGE_SIZE
    if sort == "duration":
        return _by_duration(rows, parent, spawner, status, offset)
    if not status:
        return list(rows.filter(item_index__gte=offset, item_index__lt=offset + PAGE_SIZE).order_by("item_index"))
    rows = rows.filter(status=status)
    end = min(offset + PAGE_SIZE, matching)
    if offset <= matching - end:
        return list(rows.order_by("item_index")[offset: offset + PAGE_SIZE])
    return list(reversed(rows.order_by("-item_index")[matching - end: matching - offset]))


def _by_duration(rows: QuerySet[Execution], parent: Execution, spawner: str, status: str, offset: int) -> list[Any]:
    # The sort carries ids only (a narrow sort is the cheaper one); the page's rows are
    # fetched afterwards by primary key.
    ranked = Execution.objects.filter(parent=parent, spawn_vertex=spawner, item_index__isnull=False)
    if status:
        ranked = ranked.filter(status=status)
    took = F("finished_at") - F("started_at")
    ranked = ranked.order_by(took.desc(nulls_last=True), "item_index")
    ids = list(ranked.values_list("id", flat=True)[offset: min(offset + PAGE_SIZE, DURATION_SORT_LIMIT)])
    found = {row.pk: row for row in rows.filter(id__in=ids)}
    return [found[i] for i in ids if i in found]


# --- long tail ------------------------------------------------------------------------------

# The shared selector's long tail, in fewer and cheaper passes: one sort for the three
# percentiles (over float seconds, not numeric), and the slowest ten searched only among
# children at or above p99 (at least ten of them once there are 1,000).
TAIL_STATS = """
    SELECT count(*), percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY d), max(d)
    FROM (SELECT date_part('epoch', finished_at - started_at) AS d FROM executions_execution
          WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL) x
"""

TAIL_HISTOGRAM = """
    SELECT width_bucket(date_part('epoch', finished_at - started_at), 0, %(top)s, %(buckets)s), count(*)
    FROM executions_execution
    WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL
    GROUP BY 1
"""

TAIL_SLOWEST = """
    SELECT id, item_index, status, date_part('epoch', finished_at - started_at) FROM executions_execution
    WHERE parent_id = %(parent)s AND finished_at IS NOT NULL AND started_at IS NOT NULL
      AND finished_at - started_at >= make_interval(secs => %(at_least)s)
    ORDER BY finished_at - started_at DESC, item_index LIMIT 10
"""


@dataclass(frozen=True)
class Slow:
    id: Any
    item_index: int | None
    status: str
    seconds: float


@dataclass(frozen=True)
class Tail:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    buckets: list[tuple[float, float, int]]  # (from seconds, to seconds, children)
    slowest: list[Slow]


def long_tail(parent_id: Any, *, buckets: int = 20) -> Tail:
    """Durations of a parent's finished children: percentiles, a histogram, the ten slowest."""
    with connection.cursor() as cursor:
        cursor.execute(TAIL_STATS, {"parent": parent_id})
        count, percentiles, top = cursor.fetchone()
        if not count:
            return Tail(0, None, None, None, None, [], [])
        p50, p95, p99 = (float(p) for p in percentiles)
        width = float(top) / buckets or 1.0
        cursor.execute(TAIL_HISTOGRAM, {"parent": parent_id, "top": width * buckets * 1.000001, "buckets": buckets})
        counts = dict(cursor.fetchall())
        cursor.execute(TAIL_SLOWEST, {"parent": parent_id, "at_least": p99 if count >= 1000 else 0.0})
        slowest = [Slow(*row) for row in cursor.fetchall()]
    histogram = [((b - 1) * width, b * width, int(counts.get(b, 0))) for b in range(1, buckets + 1)]
    return Tail(int(count), p50, p95, p99, float(top), histogram, slowest)


# --- steps waiting for a destination slot -----------------------------------------------------

SLOTS = """
    SELECT d.id, d.name, d.concurrency_limit,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING')
    FROM executions_destination d WHERE d.id = ANY(%(ids)s)
"""


@dataclass(frozen=True)
class Slots:
    name: str
    limit: int | None
    in_flight: int

    @property
    def saturated(self) -> bool:
        return self.limit is not None and self.in_flight >= self.limit


def slots(destination_ids: list[int]) -> dict[int, Slots]:
    """In-flight steps against each destination's limit (the partial RUNNING index)."""
    if not destination_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(SLOTS, {"ids": destination_ids})
        return {row[0]: Slots(row[1], row[2], row[3]) for row in cursor.fetchall()}


# --- Rate Limits ------------------------------------------------------------------------------

def destinations(workspace: Workspace) -> list[Destination]:
    return list(Destination.objects.filter(workspace=workspace).order_by("name"))


def destination(workspace: Workspace, destination_id: int) -> Destination | None:
    return Destination.objects.filter(workspace=workspace, pk=destination_id).first()
