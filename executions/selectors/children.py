"""Reads of one parent's children: keyset pages in item order (the API) and numbered pages
by index or by duration (the UI). Every page costs about the same, however deep."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import BooleanField, F, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr

from executions.models import Execution
from executions.selectors import fanouts
from executions.selectors.executions import PAGE_SIZE

# Children after the cursor (spawn vertex, item index), as a row comparison on the
# ``execution_unique_child_key`` index.
AFTER_CHILD = "(executions_execution.spawn_vertex, executions_execution.item_index) > (%s, %s)"


def page(parent: Execution, *, status: str | None, spawner: str | None, after: tuple[str, int] | None,
         limit: int) -> list[Execution]:
    """Up to ``limit + 1`` children in item order, with their own children's ``counts``."""
    rows = Execution.objects.select_related("workflow", "version").filter(parent=parent, item_index__isnull=False)
    if status:
        rows = rows.filter(status=status)
    if spawner:
        rows = rows.filter(spawn_vertex=spawner)
    if after:
        later = RawSQL(AFTER_CHILD, list(after), output_field=BooleanField())  # noqa: S611 - named constant SQL
        rows = rows.filter(later)
    return fanouts.with_counts(list(rows.order_by("spawn_vertex", "item_index")[: limit + 1]))


def page_key(execution: Execution) -> tuple[str | None, int | None]:
    """The cursor after ``execution`` in ``page``."""
    return (execution.spawn_vertex, execution.item_index)


# --- numbered pages (UI) ------------------------------------------------------------------------

CHILD_FIELDS = ("id", "status", "attempt", "item_index", "started_at", "finished_at")
SORTS = ("index", "duration")
# Sorting by duration reads an expression index (execution_child_duration), and lists the
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


def by_duration(parent: Any, spawner: str, status: str = "") -> QuerySet[Execution, uuid.UUID]:
    """A spawner's children's ids, slowest first, in the order of the ``execution_child_duration``
    index (models.Execution), so a page is an index range, not a sort of every child."""
    ranked = Execution.objects.filter(parent=parent, spawn_vertex=spawner, item_index__isnull=False)
    if status:
        ranked = ranked.filter(status=status)
    took = F("finished_at") - F("started_at")
    return ranked.order_by(took.desc(nulls_last=True), "item_index").values_list("id", flat=True)


def _by_duration(rows: QuerySet[Execution], parent: Execution, spawner: str, status: str, offset: int) -> list[Any]:
    # The ranking carries ids only; the page's rows are fetched afterwards by primary key.
    ranked = by_duration(parent, spawner, status)
    ids = list(ranked[offset: min(offset + PAGE_SIZE, DURATION_SORT_LIMIT)])
    found = {row.pk: row for row in rows.filter(id__in=ids)}
    return [found[i] for i in ids if i in found]
