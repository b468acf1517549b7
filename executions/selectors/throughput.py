"""A fan-out's throughput over its run: its children finished (succeeded, failed, cancelled)
per time bucket, from the fan-out's start to its last finish (or now, while it runs).

Reads the index ``execution_child_finished`` (parent, spawn_vertex, finished_at) INCLUDE
(status), partial on finished children, index-only: never a child row. And not all of it
per poll: buckets that ended more than ``SETTLE_SECONDS`` ago are kept in the cache, so a poll
reads only the index entries of the last minute or so of finishes (a range scan) and adds
them. The counts are checked against the fan-out's counters (the same a count card shows):
when they differ — a child was retried, so its old finish moved, or a transaction committed
a finish later than the settle time — the whole index range is read again, at most every
``RECOMPUTE_SECONDS`` (an index-only scan of every finished child: the cost the UI
benchmark reports as "throughput, recomputed"). The bucket width is a round number of
seconds picked from the run's span (``bucket_width``), so a chart has at most
``MAX_BUCKETS`` bars; when the span outgrows it the next width is computed afresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import connection

MAX_BUCKETS = 60
WIDTHS = (1, 2, 10, 20, 60, 120, 600, 1200, 3600, 7200, 21600, 43200, 86400)  # each a multiple of the one before
SETTLE_SECONDS = 60.0
RECOMPUTE_SECONDS = 15.0
CACHE_SECONDS = 3600
ETA_WINDOW_SECONDS = 60.0  # the recent rate an ETA extrapolates

# When the fan-out began (its row's creation, or its first finish if earlier: backdated rows),
# now, and its newest finish: the index's first and last entries.
SPAN = """
    SELECT least(f.created_at, (SELECT min(c.finished_at) FROM executions_execution c
                                 WHERE c.parent_id = f.execution_id AND c.spawn_vertex = f.spawner_vertex
                                   AND c.item_index IS NOT NULL AND c.finished_at IS NOT NULL)),
           now(),
           (SELECT max(c.finished_at) FROM executions_execution c
            WHERE c.parent_id = f.execution_id AND c.spawn_vertex = f.spawner_vertex
              AND c.item_index IS NOT NULL AND c.finished_at IS NOT NULL)
    FROM executions_fanout f WHERE f.execution_id = %(parent)s AND f.spawner_vertex = %(spawner)s
"""

# Finished children per bucket of %(width)s seconds from %(origin)s, by status, of those finished
# at or after %(since)s (a range of the index, read index-only).
BUCKETS = """
    SELECT date_bin(make_interval(secs => %(width)s), c.finished_at, %(origin)s) AS bucket,
           count(*) FILTER (WHERE c.status = 'SUCCEEDED'), count(*) FILTER (WHERE c.status = 'FAILED'),
           count(*) FILTER (WHERE c.status = 'CANCELLED')
    FROM executions_execution c
    WHERE c.parent_id = %(parent)s AND c.spawn_vertex = %(spawner)s
      AND c.item_index IS NOT NULL AND c.finished_at IS NOT NULL AND c.finished_at >= %(since)s
      AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
    GROUP BY 1"""


@dataclass(frozen=True)
class Bucket:
    start: float  # seconds after the fan-out began
    succeeded: int
    failed: int
    cancelled: int

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.cancelled


@dataclass(frozen=True)
class Throughput:
    began_at: datetime | None
    width: int  # seconds per bucket
    span: float  # seconds from the fan-out's start to the chart's end
    buckets: list[Bucket]  # every bucket of the span, oldest first, empty ones included

    @property
    def succeeded(self) -> int:
        return sum(b.succeeded for b in self.buckets)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.buckets)

    @property
    def cancelled(self) -> int:
        return sum(b.cancelled for b in self.buckets)

    @property
    def finished(self) -> int:
        return sum(b.finished for b in self.buckets)

    def recent_rate(self, window: float = ETA_WINDOW_SECONDS) -> float:
        """Children finished per second over the last ``window`` seconds of the span (the
        whole span if shorter), the partly covered bucket counted pro rata."""
        return recent_rate(self.buckets, self.width, self.span, window)


def bucket_width(span_seconds: float, max_buckets: int = MAX_BUCKETS) -> int:
    """The smallest round width that covers ``span_seconds`` in at most ``max_buckets`` bars."""
    needed = max(span_seconds, 1.0) / max_buckets
    return next((w for w in WIDTHS if w >= needed), math.ceil(needed / WIDTHS[-1]) * WIDTHS[-1])


def filled(rows: list[tuple[int, int, int, int]], width: int, span: float) -> list[Bucket]:
    """Every bucket from 0 to the span's end, the missing ones empty (a finish recorded before
    the fan-out row — clock skew — lands in the first bucket, one after the span's end in the last)."""
    count = max(1, math.ceil(span / width)) if span > 0 else 1
    found: dict[int, list[int]] = {}
    for number, succeeded, failed, cancelled in rows:
        slot = found.setdefault(min(max(number, 0), count - 1), [0, 0, 0])
        slot[0] += succeeded
        slot[1] += failed
        slot[2] += cancelled
    return [Bucket(float(i * width), *found.get(i, [0, 0, 0])) for i in range(count)]


def recent_rate(buckets: list[Bucket], width: int, span: float, window: float) -> float:
    if not buckets or span <= 0:
        return 0.0
    window = min(window, span)
    since = span - window
    total = 0.0
    for bucket in buckets:
        end = min(bucket.start + width, span)
        covered = max(0.0, end - max(bucket.start, since))
        if covered and end > bucket.start:
            total += bucket.finished * covered / (end - bucket.start)
    return total / window if window else 0.0


def eta_seconds(remaining: int, rate: float) -> float | None:
    """How long the ``remaining`` children take at ``rate`` per second (None: no rate yet)."""
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate > 0 else None


def of_fanout(parent: Any, spawner: str, *, running: bool, finished: int | None = None) -> Throughput:
    """The buckets of one fan-out: the span ends at now while it runs (children still open),
    else at its newest finish. ``finished``: the fan-out's counters' finished children, to
    check the counts against (None: read every finished child, no cache)."""
    with connection.cursor() as cursor:
        cursor.execute(SPAN, {"parent": parent, "spawner": spawner})
        row = cursor.fetchone()
        if row is None:
            return Throughput(None, 1, 0.0, [])
        began, now, last = row
        end = now if running or last is None else max(last, began)
        span = max((end - began).total_seconds(), 0.0)
        width = bucket_width(span)
        if last is None:
            return Throughput(began, width, span, filled([], width, span))
        counts = _counts(cursor, parent, spawner, began, now, width, finished)
    rows = [(n, c[0], c[1], c[2]) for n, c in sorted(counts.items())]
    return Throughput(began, width, span, filled(rows, width, span))


def cache_key(parent: Any, spawner: str) -> str:
    return f"sb-ui:throughput:{parent}:{spawner}"


def _counts(cursor: Any, parent: Any, spawner: str, origin: datetime, now: datetime, width: int,
            finished: int | None) -> dict[int, list[int]]:
    """Bucket number → [succeeded, failed, cancelled]: the settled buckets from the cache, the
    rest read; all read again when they do not add up to ``finished``."""
    key = cache_key(parent, spawner)
    cached = cache.get(key) if finished is not None else None
    if cached is not None and (cached["origin"], cached["width"]) != (origin, width):
        cached = None
    full_at = cached["full_at"] if cached else None
    counts = _read(cursor, parent, spawner, origin, width, cached)
    total = sum(sum(c) for c in counts.values())
    recent_full = full_at is not None and (now - full_at).total_seconds() < RECOMPUTE_SECONDS
    if cached is not None and finished is not None and total != finished and not recent_full:
        cached = None
        counts = _read(cursor, parent, spawner, origin, width, None)
    if cached is None:
        full_at = now
    if finished is not None:
        boundary = math.floor(max(0.0, (now - origin).total_seconds() - SETTLE_SECONDS) / width)
        settled = max(boundary, cached["settled"] if cached else 0)
        entry = {"origin": origin, "width": width, "settled": settled, "full_at": full_at,
                 "frozen": {n: c for n, c in counts.items() if n < settled}}
        if entry != cached:  # most polls change nothing settled: no write
            cache.set(key, entry, timeout=CACHE_SECONDS)
    return counts


def _read(cursor: Any, parent: Any, spawner: str, origin: datetime, width: int,
          cached: dict[str, Any] | None) -> dict[int, list[int]]:
    counts: dict[int, list[int]] = {int(n): list(c) for n, c in (cached or {}).get("frozen", {}).items()}
    since = origin + timedelta(seconds=width * cached["settled"]) if cached else origin
    cursor.execute(BUCKETS, {"parent": parent, "spawner": spawner, "origin": origin, "width": width, "since": since})
    for bucket, succeeded, failed, cancelled in cursor.fetchall():
        number = round((bucket - origin).total_seconds() / width)
        slot = counts.setdefault(number, [0, 0, 0])
        slot[0] += succeeded
        slot[1] += failed
        slot[2] += cancelled
    return counts
