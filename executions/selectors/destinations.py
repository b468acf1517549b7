"""Reads of destinations: pages and lookups within a workspace, live counts for the Rate
Limits page, and free slots for steps that wait for one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from executions.core import flow
from executions.models import Destination
from workflows.errors import NotFound
from workflows.models import Workspace


def page(workspace: Workspace, *, after: str | None, limit: int) -> list[Destination]:
    """Up to ``limit + 1`` destinations by name, after the name ``after`` (a keyset page)."""
    rows = Destination.objects.filter(workspace=workspace)
    if after is not None:
        rows = rows.filter(name__gt=after)
    return list(rows.order_by("name")[: limit + 1])


def every(workspace: Workspace) -> list[Destination]:
    """All of a workspace's destinations by name (the Rate Limits page lists them all)."""
    return list(Destination.objects.filter(workspace=workspace).order_by("name"))


def named(workspace: Workspace, name: str) -> Destination:
    found = Destination.objects.filter(workspace=workspace, name=name).first()
    if found is None:
        raise NotFound(f"no destination '{name}' in this workspace")
    return found


def by_id(workspace: Workspace, destination_id: int) -> Destination:
    found = Destination.objects.filter(workspace=workspace, pk=destination_id).first()
    if found is None:
        raise NotFound(f"no destination {destination_id}")
    return found


# Per destination: slots in use, steps waiting for one (due and READY, or claimed into a
# worker's queue: RUNNING without a slot, leases.py "Slots"), and over the last five minutes
# the calls, the failed calls, the 429s and the p50/p95 latency; and its flow state now: the
# limit in effect (flow.EFFECTIVE), whether it cools down, whether its breaker is open (the
# other flow columns — mode, concurrency_current and why — are the Destination's own).
LIVE_COUNTS = f"""
    SELECT d.id, {flow.EFFECTIVE} AS limit_now,
           CASE WHEN d.cooling_until > now() THEN d.cooling_until END AS cooling_until,
           CASE WHEN d.breaker_state = 'open' AND d.breaker_open_until > now() THEN d.breaker_open_until END
               AS open_until,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING'
                AND s.holds_slot) AS in_flight,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'READY'
                AND s.due_at <= now())
           + (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING'
                AND NOT s.holds_slot) AS waiting,
           (SELECT count(*) FROM executions_destinationcall c WHERE c.destination_id = d.id
                AND c.created_at > now() - interval '5 minutes') AS calls,
           (SELECT count(*) FROM executions_destinationcall c WHERE c.destination_id = d.id
                AND c.created_at > now() - interval '5 minutes' AND NOT c.ok) AS errors,
           (SELECT count(*) FROM executions_destinationcall c WHERE c.destination_id = d.id
                AND c.created_at > now() - interval '5 minutes' AND c.status_code = 429) AS throttled,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY c.latency_ms) FROM executions_destinationcall c
                WHERE c.destination_id = d.id AND c.created_at > now() - interval '5 minutes') AS p50_ms,
           (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY c.latency_ms) FROM executions_destinationcall c
                WHERE c.destination_id = d.id AND c.created_at > now() - interval '5 minutes') AS p95_ms
    FROM executions_destination d WHERE d.id = ANY(%(ids)s)
"""  # noqa: S608 - constant SQL


def live_counts(destination_ids: list[int]) -> dict[int, dict[str, Any]]:
    """By destination id: limit_now, cooling_until, open_until (None unless cooling down, open),
    in_flight, waiting, calls, errors, throttled (429s), p50_ms, p95_ms."""
    if not destination_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(LIVE_COUNTS, {"ids": destination_ids})
        names = [column.name for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


# Each destination's limit in effect (flow.EFFECTIVE: the configured one, the current one of
# adaptive mode or a ramp, one probe while the breaker is not closed), the slots its RUNNING
# steps hold (the partial RUNNING index; a step queued in its drain for a slot holds none,
# leases.py "Slots"), and its flow state: cooling down, breaker open.
SLOTS = f"""
    SELECT d.id, d.name, {flow.EFFECTIVE},
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING'
                AND s.holds_slot),
           CASE WHEN d.cooling_until > now() THEN d.cooling_until END,
           d.breaker_state, CASE WHEN d.breaker_state <> 'closed' THEN d.breaker_open_until END
    FROM executions_destination d WHERE d.id = ANY(%(ids)s)
"""  # noqa: S608 - constant SQL


@dataclass(frozen=True)
class Slots:
    name: str
    limit: int | None  # the limit in effect now
    in_flight: int
    cooling_until: datetime | None = None  # while it cools down after a throttled answer
    breaker_state: str = "closed"
    breaker_open_until: datetime | None = None

    @property
    def saturated(self) -> bool:
        return self.limit is not None and self.in_flight >= self.limit

    @property
    def held(self) -> str:
        """Why no step may call it now (a cooldown, an open breaker), in words, or ''."""
        if self.cooling_until is not None:
            return f"destination '{self.name}' is cooling down after a throttled answer until " \
                   f"{self.cooling_until.isoformat(timespec='seconds')}"
        if self.breaker_state == "open" and self.breaker_open_until is not None:
            return f"destination {self.name} is failing: circuit open until " \
                   f"{self.breaker_open_until.isoformat(timespec='seconds')}"
        if self.breaker_state != "closed":
            return f"destination {self.name} is failing: one probe call decides whether its circuit closes"
        return ""


def slots(destination_ids: list[int]) -> dict[int, Slots]:
    """In-flight steps against each destination's limit in effect, and its flow state."""
    if not destination_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(SLOTS, {"ids": destination_ids})
        return {row[0]: Slots(*row[1:]) for row in cursor.fetchall()}


# The last ``minutes`` of each destination's call log in buckets of ``bucket`` seconds, by the
# time each call ended: calls, failed calls, throttled answers (429, or 503 — a 503 that is a
# throttled answer and one that is an overload look the same in the log), the time spent in
# calls, whose ratio to the bucket's length is the mean number of calls in flight (Little's
# law; a call is counted whole in the bucket it ended in), and the p95 latency. The range scan
# of call_destination_recent reads only the window's rows.
HISTORY = """
    SELECT c.destination_id,
           floor(extract(epoch FROM now() - c.created_at) / %(bucket)s)::int AS ago,
           count(*) AS calls, count(*) FILTER (WHERE NOT c.ok) AS errors,
           count(*) FILTER (WHERE c.status_code IN (429, 503)) AS throttled,
           coalesce(sum(c.latency_ms), 0) AS busy_ms,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY c.latency_ms) AS p95_ms
    FROM executions_destinationcall c
    WHERE c.destination_id = ANY(%(ids)s) AND c.created_at > now() - make_interval(mins => %(minutes)s)
    GROUP BY 1, 2
"""

# The limit in force at the end of each bucket that saw a change (the last change in it), and
# (ago = -1) the one in force when the window began: the newest change before it. Both read
# limit_destination_recent (executions_destinationlimit: a row per change, migration 0025).
LIMIT_HISTORY = """
    SELECT DISTINCT ON (h.destination_id, 2) h.destination_id,
           floor(extract(epoch FROM now() - h.created_at) / %(bucket)s)::int AS ago, h."limit"
    FROM executions_destinationlimit h
    WHERE h.destination_id = ANY(%(ids)s) AND h.created_at > now() - make_interval(mins => %(minutes)s)
    ORDER BY h.destination_id, 2, h.created_at DESC, h.id DESC
"""
LIMIT_BEFORE = """
    SELECT i.id, b."limit"
    FROM unnest(%(ids)s::bigint[]) AS i(id)
    CROSS JOIN LATERAL (SELECT h."limit" FROM executions_destinationlimit h
                        WHERE h.destination_id = i.id AND h.created_at <= now() - make_interval(mins => %(minutes)s)
                        ORDER BY h.created_at DESC, h.id DESC LIMIT 1) b
"""

# Slots in use and steps waiting, the most counted in a bucket's samples
# (executions/core/flow_history.py), read through the (at, destination) unique index: a few
# rows per destination and bucket.
SAMPLES = """
    SELECT s.destination_id, floor(extract(epoch FROM now() - s.at) / %(bucket)s)::int AS ago,
           max(s.in_flight), max(s.waiting)
    FROM executions_destinationsample s
    WHERE s.at > now() - make_interval(mins => %(minutes)s) AND s.destination_id = ANY(%(ids)s)
    GROUP BY 1, 2
"""


@dataclass(frozen=True)
class Bucket:
    """One bucket of a destination's recent flow (``ago``: buckets before now, 0 = newest):
    its calls, ``limit`` in force at its end (None: unlimited), slots in use (``in_flight``) and
    steps ``waiting`` (the most sampled), ``p95_ms`` of its calls (None: no call)."""

    ago: int
    calls: int
    errors: int
    throttled: int
    mean_in_flight: float
    limit: int | None = None
    in_flight: int = 0
    waiting: int = 0
    p95_ms: float | None = None


def history(destination_ids: list[int], *, minutes: int = 15, bucket_seconds: int = 30) -> dict[int, list[Bucket]]:
    """By destination id, every bucket of the last ``minutes`` (oldest first; empty buckets
    included, so a chart's x axis is time). Four indexed range reads in one transaction (one
    now()), none of the steps."""
    if not destination_ids:
        return {}
    n = max(1, minutes * 60 // bucket_seconds)
    params: dict[str, Any] = {"ids": destination_ids, "minutes": minutes, "bucket": bucket_seconds}
    calls: dict[int, dict[int, tuple[Any, ...]]] = {d: {} for d in destination_ids}
    changes: dict[int, dict[int, int | None]] = {d: {} for d in destination_ids}
    sampled: dict[int, dict[int, tuple[int, int]]] = {d: {} for d in destination_ids}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(HISTORY, params)
        for destination, ago, *row in cursor.fetchall():
            calls[destination][ago] = tuple(row)
        cursor.execute(LIMIT_HISTORY, params)
        for destination, ago, limit in cursor.fetchall():
            changes[destination][ago] = limit
        cursor.execute(LIMIT_BEFORE, params)
        before = dict(cursor.fetchall())
        cursor.execute(SAMPLES, params)
        for destination, ago, in_flight, waiting in cursor.fetchall():
            sampled[destination][ago] = (in_flight, waiting)
    return {d: _buckets(n, bucket_seconds, calls[d], changes[d], before, d, sampled[d]) for d in destination_ids}


def _buckets(n: int, bucket_seconds: int, calls: dict[int, tuple[Any, ...]], changes: dict[int, int | None],
             before: dict[int, int | None], destination: int, sampled: dict[int, tuple[int, int]]) -> list[Bucket]:
    # Before its first row a destination did not exist (its creation writes one; migration 0025
    # one for each destination there was): no limit is drawn there (None, as for unlimited).
    limit = before.get(destination)
    out = []
    for ago in range(n - 1, -1, -1):
        limit = changes.get(ago, limit)
        count, errors, throttled, busy_ms, p95 = calls.get(ago, (0, 0, 0, 0, None))
        in_flight, waiting = sampled.get(ago, (0, 0))
        out.append(Bucket(ago, count, errors, throttled, float(busy_ms) / (bucket_seconds * 1000), limit,
                          in_flight, waiting, None if p95 is None else float(p95)))
    return out
