"""Reads of destinations: pages and lookups within a workspace, live counts for the Rate
Limits page, and free slots for steps that wait for one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

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
# the calls, the failed calls, the 429s and the p50/p95 latency. (The flow state — mode,
# concurrency_current, cooling_until, breaker_state — is the Destination's own columns.)
LIVE_COUNTS = """
    SELECT d.id,
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
"""


def live_counts(destination_ids: list[int]) -> dict[int, dict[str, Any]]:
    """By destination id: in_flight, waiting, calls, errors, throttled (429s), p50_ms, p95_ms."""
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
# throttled answer and one that is an overload look the same in the log) and the time spent in
# calls, whose ratio to the bucket's length is the mean number of calls in flight (Little's
# law; a call is counted whole in the bucket it ended in). The range scan of
# call_destination_recent reads only the window's rows.
HISTORY = """
    SELECT c.destination_id,
           floor(extract(epoch FROM now() - c.created_at) / %(bucket)s)::int AS ago,
           count(*) AS calls, count(*) FILTER (WHERE NOT c.ok) AS errors,
           count(*) FILTER (WHERE c.status_code IN (429, 503)) AS throttled,
           coalesce(sum(c.latency_ms), 0) AS busy_ms
    FROM executions_destinationcall c
    WHERE c.destination_id = ANY(%(ids)s) AND c.created_at > now() - make_interval(mins => %(minutes)s)
    GROUP BY 1, 2
"""


@dataclass(frozen=True)
class Bucket:
    """One bucket of a destination's recent calls (``ago``: buckets before now, 0 = newest)."""

    ago: int
    calls: int
    errors: int
    throttled: int
    mean_in_flight: float


def history(destination_ids: list[int], *, minutes: int = 15, bucket_seconds: int = 30) -> dict[int, list[Bucket]]:
    """By destination id, every bucket of the last ``minutes`` (oldest first; empty buckets
    included, so a chart's x axis is time)."""
    if not destination_ids:
        return {}
    n = max(1, minutes * 60 // bucket_seconds)
    found: dict[int, dict[int, Bucket]] = {d: {} for d in destination_ids}
    with connection.cursor() as cursor:
        cursor.execute(HISTORY, {"ids": destination_ids, "minutes": minutes, "bucket": bucket_seconds})
        for destination, ago, calls, errors, throttled, busy_ms in cursor.fetchall():
            if 0 <= ago < n:
                found[destination][ago] = Bucket(ago, calls, errors, throttled,
                                                 float(busy_ms) / (bucket_seconds * 1000))
    return {d: [buckets.get(ago, Bucket(ago, 0, 0, 0, 0.0)) for ago in range(n - 1, -1, -1)]
            for d, buckets in found.items()}
