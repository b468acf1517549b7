"""Reads of one parent's children: keyset pages in item order (the API), numbered pages by
index or by duration (the UI), and the streamed export of all of them (the API's
children.jsonl / children.csv). Every page costs about the same, however deep."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, F, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Substr

from executions.models import Execution
from executions.selectors import fanouts
from executions.selectors.executions import PAGE_SIZE

# Children after the cursor (spawn vertex, item index), as a row comparison on the
# ``execution_unique_child_key`` index.
AFTER_CHILD = "(executions_execution.spawn_vertex, executions_execution.item_index) > (%s, %s)"


@dataclass(frozen=True)
class Filter:
    """Which children (every term given must match): ``item_keys`` None is no key filter, an
    empty tuple matches nothing; ``error_contains`` is a case-insensitive substring."""

    status: str = ""
    spawner: str = ""
    item_keys: tuple[str, ...] | None = None
    error_contains: str = ""

    @property
    def narrows(self) -> bool:
        """Whether it filters by more than status and spawner (the UI then pages by offset)."""
        return self.item_keys is not None or bool(self.error_contains)


def filtered(parent: Any, found: Filter) -> QuerySet[Execution]:
    """The children of ``parent`` that match ``found``: by item key on the
    ``execution_child_item_key`` index, by status on ``execution_parent_status``."""
    rows = Execution.objects.filter(parent=parent, item_index__isnull=False)
    if found.item_keys is not None:
        rows = rows.filter(item_key__in=found.item_keys)
    if found.status:
        rows = rows.filter(status=found.status)
    if found.spawner:
        rows = rows.filter(spawn_vertex=found.spawner)
    if found.error_contains:
        rows = rows.filter(error__icontains=found.error_contains)
    return rows


def page(parent: Execution, found: Filter, *, after: tuple[str, int] | None, limit: int) -> list[Execution]:
    """Up to ``limit + 1`` children in item order, with their own children's ``counts``."""
    return fanouts.with_counts(list(page_rows(parent, found, after=after, limit=limit)))


def page_rows(parent: Any, found: Filter, *, after: tuple[str, int] | None, limit: int) -> QuerySet[Execution]:
    """``page``'s query (tests/integration/test_keys_plans.py reads its plan)."""
    rows = filtered(parent, found).select_related("workflow", "version")
    if after:
        later = RawSQL(AFTER_CHILD, list(after), output_field=BooleanField())  # noqa: S611 - named constant SQL
        rows = rows.filter(later)
    return rows.order_by("spawn_vertex", "item_index")[: limit + 1]


def page_key(execution: Execution) -> tuple[str | None, int | None]:
    """The cursor after ``execution`` in ``page``."""
    return (execution.spawn_vertex, execution.item_index)


# --- numbered pages (UI) ------------------------------------------------------------------------

CHILD_FIELDS = ("id", "status", "attempt", "item_index", "item_key", "started_at", "attempt_started_at",
                "finished_at")
SORTS = ("index", "duration")
# Sorting by duration reads an expression index (execution_child_round_duration), and lists the
# slowest DURATION_SORT_LIMIT only: nobody pages through thousands of them by duration.
DURATION_SORT_LIMIT = 1000


def of_spawner(parent: Execution, spawner: str, *, status: str, sort: str, page: int, matching: int) -> list[Any]:
    """One ``PAGE_SIZE`` page of a spawner's children (``matching`` = how many match, from
    the fan-out counters), each with an ``error_snippet``:

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


def matching_page(parent: Execution, found: Filter, *, page: int) -> tuple[list[Any], bool]:
    """One ``PAGE_SIZE`` page (in item order) of the children that match a search (item keys,
    error text: ``Filter.narrows``), each with an ``error_snippet``, and whether more follow
    (one extra row, never a count: an error search may match many)."""
    rows = filtered(parent, found).only(*CHILD_FIELDS).annotate(error_snippet=Substr("error", 1, 200))
    offset = (page - 1) * PAGE_SIZE
    found_rows = list(rows.order_by("item_index")[offset: offset + PAGE_SIZE + 1])
    return found_rows[:PAGE_SIZE], len(found_rows) > PAGE_SIZE


def by_duration(parent: Any, spawner: str, status: str = "") -> QuerySet[Execution, uuid.UUID]:
    """A spawner's children's ids, slowest first (their latest round), in the order of the
    ``execution_child_round_duration`` index (models.Execution), so a page is an index range,
    not a sort of every child."""
    ranked = Execution.objects.filter(parent=parent, spawn_vertex=spawner, item_index__isnull=False)
    if status:
        ranked = ranked.filter(status=status)
    took = F("finished_at") - Coalesce(F("attempt_started_at"), F("started_at"))
    return ranked.order_by(took.desc(nulls_last=True), "item_index").values_list("id", flat=True)


def _by_duration(rows: QuerySet[Execution], parent: Execution, spawner: str, status: str, offset: int) -> list[Any]:
    # The ranking carries ids only; the page's rows are fetched afterwards by primary key.
    ranked = by_duration(parent, spawner, status)
    ids = list(ranked[offset: min(offset + PAGE_SIZE, DURATION_SORT_LIMIT)])
    found = {row.pk: row for row in rows.filter(id__in=ids)}
    return [found[i] for i in ids if i in found]


# --- exports (API: children.jsonl / children.csv) -------------------------------------------------

EXPORT_PAGE = 1000  # children per query: an export of N children costs N / EXPORT_PAGE queries
EXPORT_INLINE_BYTES = 64 * 1024  # a larger output is exported as its size only

# One keyset page of a parent's children for an export, in (spawner, item) order after the
# cursor, on the ``execution_unique_child_key`` index: each page costs the same however deep.
# The output (the payload of the vertex that finished the child) is read only when it is at
# most EXPORT_INLINE_BYTES; otherwise only its recorded size.
EXPORT_PAGE_SQL = """
    SELECT e.item_index, e.id, e.spawn_vertex, e.status, e.attempt, e.error,
           CASE WHEN p.size_bytes <= %(inline)s THEN p.data::text END AS output, p.size_bytes
    FROM executions_execution e
    LEFT JOIN executions_payload p ON p.execution_id = e.id AND p.name = e.output_vertex
    WHERE e.parent_id = %(parent)s AND e.item_index IS NOT NULL
      AND (%(status)s::varchar IS NULL OR e.status = %(status)s::varchar)
      AND (e.spawn_vertex, e.item_index) > (%(after_vertex)s::varchar, %(after_index)s::int)
    ORDER BY e.spawn_vertex, e.item_index
    LIMIT %(limit)s
"""


@dataclass(frozen=True)
class ExportedChild:
    index: int
    id: uuid.UUID
    spawner: str
    status: str
    attempt: int
    error: str
    output: str | None  # JSON text; None when there is none or it is larger than EXPORT_INLINE_BYTES
    output_bytes: int | None  # the stored output's size; None when there is no output


def export(parent: Execution, *, status: str | None = None, page_size: int = EXPORT_PAGE) -> Iterator[ExportedChild]:
    """Every child of ``parent`` (optionally only those with ``status``), in item order,
    read lazily one keyset page at a time: memory holds one page, queries are
    O(children / page_size). For a streaming response, so the generator runs while the
    response is sent."""
    after: tuple[str, int] = ("", -1)  # before every (spawner, index): vertex ids are never empty
    while True:
        with connection.cursor() as cursor:
            cursor.execute(EXPORT_PAGE_SQL, {"parent": parent.pk, "status": status, "after_vertex": after[0],
                                             "after_index": after[1], "limit": page_size,
                                             "inline": EXPORT_INLINE_BYTES})
            rows = cursor.fetchall()
        for row in rows:
            yield ExportedChild(*row)
        if len(rows) < page_size:
            return
        after = (rows[-1][2], rows[-1][0])
