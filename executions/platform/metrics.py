"""Prometheus metrics (docs/operations.md). Every name starts with ``schemabridge_``.

Two kinds, kept apart:

* **Events** — counters and histograms incremented where things happen (a claim, a commit,
  a reap, a spawn batch, an outbound call, a drain error), through the small functions
  below, one call per site. An event inside a transaction is counted when it commits
  (``transaction.on_commit``), so a rolled-back batch counts nothing.
* **State** — gauges that are database facts (queue depth, destination in-flight, payload
  bytes) are not kept in memory at all: ``DatabaseCollector`` reads them with a few cheap
  indexed queries at scrape time, so every web process answers the same.

Several processes (gunicorn workers, qcluster workers) count events at once. With
``PROMETHEUS_MULTIPROC_DIR`` set (``manage.py sb_up`` sets it) each process writes its values
to files there and a scrape adds them up (prometheus-client's multiprocess mode); without it,
the values are this process's own (tests, a single process).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec

from django.conf import settings
from django.db import connection, transaction
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
P = ParamSpec("P")

PREFIX = "schemabridge_"

# In multiprocess mode every metric opens its file there when it is created (below): a
# directory that does not exist yet would fail the import of this module, so make it.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"].strip()).mkdir(parents=True, exist_ok=True)
# Database round trips: sub-millisecond to seconds.
DB_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Outbound calls: milliseconds to a destination's timeout.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

STEPS_CLAIMED = Counter(f"{PREFIX}steps_claimed_total", "Steps claimed by a worker.", ["kind"])
STEPS_SUCCEEDED = Counter(f"{PREFIX}steps_succeeded_total", "Steps that succeeded.", ["kind"])
STEPS_FAILED = Counter(f"{PREFIX}steps_failed_total", "Steps that failed for good (no attempt left, or "
                       "not retryable).", ["kind"])
STEPS_RETRIED = Counter(f"{PREFIX}steps_retried_total", "Failed attempts put back to wait for a retry.", ["kind"])
RESULTS_FENCED = Counter(f"{PREFIX}results_fenced_total", "Results discarded because the worker's lease was no "
                         "longer current (S5).")
CLAIM_SECONDS = Histogram(f"{PREFIX}claim_seconds", "Time to claim a batch of steps (the claim transaction).",
                          buckets=DB_BUCKETS)
COMMIT_SECONDS = Histogram(f"{PREFIX}commit_seconds", "Time to commit a batch of step results (one transaction).",
                           buckets=DB_BUCKETS)
LEASE_EXPIRIES = Counter(f"{PREFIX}lease_expiries_total", "Step leases found expired by the reaper (their "
                         "worker died or stalled).")
STEPS_REAPED = Counter(f"{PREFIX}steps_reaped_total", "Steps with an expired lease moved by the reaper: "
                       "requeued, or failed once out of attempts.", ["outcome"])
CHILDREN_CREATED = Counter(f"{PREFIX}children_created_total", "Child executions created by fan-outs.")
CHILDREN_FINISHED = Counter(f"{PREFIX}children_finished_total", "Child executions that reached a terminal "
                            "status.", ["status"])
DESTINATION_CALLS = Counter(f"{PREFIX}destination_calls_total", "Outbound calls to a destination.",
                            ["workspace", "destination"])
DESTINATION_ERRORS = Counter(f"{PREFIX}destination_errors_total", "Outbound calls that failed: no response "
                             "(transport, refused address, deadline) or an HTTP status of 400 and above.",
                             ["workspace", "destination", "reason"])
DESTINATION_CALL_SECONDS = Histogram(f"{PREFIX}destination_call_seconds", "Outbound call latency per destination.",
                                     ["workspace", "destination"], buckets=CALL_BUCKETS)
DESTINATION_THROTTLED = Counter(f"{PREFIX}destination_throttled_total", "Throttled answers of a destination (429, "
                                "or 503 with Retry-After).", ["workspace", "destination"])
DESTINATION_COOLDOWNS = Counter(f"{PREFIX}destination_cooldowns_total", "Cooldowns a destination's throttled answers "
                                "started (no call to it until they end).", ["workspace", "destination"])
DRAIN_ERRORS = Counter(f"{PREFIX}drain_errors_total", "Errors a drain recovered from: a lost database "
                       "connection, anything unexpected, a result the database refused.", ["reason"])


# --- events --------------------------------------------------------------------------------------

def never_raises(count: Callable[P, None]) -> Callable[P, None]:
    """Counting must never break the work it counts (a full disk under the multiprocess
    directory, say): an error is logged and the count is lost."""

    @functools.wraps(count)
    def safely(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            count(*args, **kwargs)
        except Exception:
            log.warning("metrics: %s failed; the count is lost", count.__name__, exc_info=True)

    return safely


def after_commit(count: Callable[[], None]) -> None:
    """Count ``count`` once the current transaction commits (now, outside one)."""
    transaction.on_commit(never_raises(count))


@contextmanager
def timed(histogram: Histogram) -> Iterator[None]:
    """Observe the seconds the ``with`` block took (also when it raised)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        never_raises(histogram.observe)(time.perf_counter() - started)


def kind_of(run: Any) -> str:
    """A step run's vertex kind (TASK, HTTP, SPAWNER, …), the label of the step counters."""
    return str(getattr(run.vertex, "type", "") or type(run.vertex).__name__.upper())


@never_raises
def steps_claimed(runs: Iterable[Any]) -> None:
    for kind, count in Tally(kind_of(run) for run in runs).items():
        STEPS_CLAIMED.labels(kind).inc(count)


@never_raises
def steps_committed(groups: dict[str, list[tuple[Any, Any]]], moved: set[int]) -> None:
    """Count the committed outcomes of ``engine.commit`` (grouped by kind of outcome; only
    the steps that ``moved`` count: the others were stale)."""
    counters = {"succeeded": STEPS_SUCCEEDED, "failed": STEPS_FAILED, "retry": STEPS_RETRIED}
    tallies = {key: Tally(kind_of(run) for run, _ in groups.get(key, []) if run.step_id in moved)
               for key in counters}

    def count() -> None:
        for key, tally in tallies.items():
            for kind, number in tally.items():
                counters[key].labels(kind).inc(number)

    after_commit(count)


@never_raises
def results_fenced(number: int) -> None:
    after_commit(lambda: RESULTS_FENCED.inc(number))


@never_raises
def reaped(requeued: int, failed: int) -> None:
    def count() -> None:
        LEASE_EXPIRIES.inc(requeued + failed)
        STEPS_REAPED.labels("requeued").inc(requeued)
        STEPS_REAPED.labels("failed").inc(failed)

    if requeued or failed:
        after_commit(count)


@never_raises
def children_created(number: int) -> None:
    if number:
        after_commit(lambda: CHILDREN_CREATED.inc(number))


@never_raises
def children_finished(moved: Sequence[dict[str, Any]]) -> None:
    """Count the children among executions that just moved (state.py): a row with a
    ``spawned_by_id`` that reached a terminal status."""
    tally = Tally(row["status"] for row in moved
                  if row.get("spawned_by_id") is not None and row["status"] in TERMINAL)

    def count() -> None:
        for status, number in tally.items():
            CHILDREN_FINISHED.labels(status).inc(number)

    if tally:
        after_commit(count)


TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


_slugs: dict[int, str] = {}
WORKSPACE_SLUG = "SELECT slug FROM workflows_workspace WHERE id = %(id)s"

# A destination's labels: its workspace's slug and its name (looked up once per process).
_destination_labels: dict[int, tuple[str, str]] = {}
DESTINATION_LABELS = """
    SELECT d.id, w.slug, d.name FROM executions_destination d JOIN workflows_workspace w ON w.id = d.workspace_id
    WHERE d.id = ANY(%(ids)s)
"""


@never_raises
def destination_calls(rows: Sequence[tuple[int, int, int | None, float, str]]) -> None:
    """Outbound calls as the call log records them ``(destination_id, step_id, status, seconds,
    error)`` — counted where they are recorded, on a thread with a database connection (an
    HTTP step on the drain's event loop must not query)."""
    missing = sorted({row[0] for row in rows} - set(_destination_labels))
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(DESTINATION_LABELS, {"ids": missing})
            _destination_labels.update({row[0]: (row[1], row[2]) for row in cursor.fetchall()})
    # Per destination, not per call: a commit records hundreds of calls to a few destinations,
    # and each labelled child found costs a lock and a lookup (in multiprocess mode, each
    # increment a locked write to the process's file).
    by_destination: dict[int, list[tuple[int | None, float]]] = {}
    for destination_id, _, status, seconds, _ in rows:
        by_destination.setdefault(destination_id, []).append((status, seconds))
    for destination_id, calls in by_destination.items():
        labels = _destination_labels.get(destination_id, ("?", str(destination_id)))
        DESTINATION_CALLS.labels(*labels).inc(len(calls))
        observe = DESTINATION_CALL_SECONDS.labels(*labels).observe
        errors = Tally[str]()
        for status, seconds in calls:
            observe(seconds)
            if status is None:
                errors["no_response"] += 1
            elif status >= 400:
                errors[f"http_{status // 100}xx"] += 1
        for reason, number in errors.items():
            DESTINATION_ERRORS.labels(*labels, reason).inc(number)


def destination_flow(destination_id: int, *, throttled: int, cooldowns: int) -> None:
    """A commit's throttled answers and started cooldowns at a destination (counted at commit)."""
    if not throttled and not cooldowns:
        return

    def count() -> None:
        labels = _labels_of(destination_id)
        if throttled:
            DESTINATION_THROTTLED.labels(*labels).inc(throttled)
        if cooldowns:
            DESTINATION_COOLDOWNS.labels(*labels).inc(cooldowns)
    transaction.on_commit(never_raises(count))


def _labels_of(destination_id: int) -> tuple[str, str]:
    if destination_id not in _destination_labels:
        with connection.cursor() as cursor:
            cursor.execute(DESTINATION_LABELS, {"ids": [destination_id]})
            _destination_labels.update({row[0]: (row[1], row[2]) for row in cursor.fetchall()})
    return _destination_labels.get(destination_id, ("?", str(destination_id)))


def workspace_slug(workspace_id: int) -> str:
    """A workspace's slug, the ``workspace`` label (looked up once per process)."""
    if workspace_id not in _slugs:
        with connection.cursor() as cursor:
            cursor.execute(WORKSPACE_SLUG, {"id": workspace_id})
            row = cursor.fetchone()
        _slugs[workspace_id] = row[0] if row else str(workspace_id)
    return _slugs[workspace_id]


@never_raises
def drain_error(reason: str) -> None:
    DRAIN_ERRORS.labels(reason).inc()


# --- state, read at scrape time -------------------------------------------------------------------

# Each count walks one of the step table's partial indexes (step_claim_free,
# step_claim_destination, step_running_lease, step_running_destination): the WHERE clauses
# are exactly their predicates, so a scrape never scans the (large) table itself.
QUEUE = """
    SELECT coalesce(sum(ready), 0), coalesce(sum(later), 0),
           greatest(0, coalesce(extract(epoch FROM now() - min(oldest)), 0))
    FROM (
        SELECT count(*) FILTER (WHERE due_at <= now()) AS ready, count(*) FILTER (WHERE due_at > now()) AS later,
               min(due_at) AS oldest
        FROM executions_step WHERE status = 'READY' AND destination_id IS NULL
        UNION ALL
        SELECT count(*) FILTER (WHERE due_at <= now()), count(*) FILTER (WHERE due_at > now()), min(due_at)
        FROM executions_step WHERE status = 'READY' AND destination_id IS NOT NULL
    ) per_index
"""
RUNNING = """
    SELECT count(*), count(*) FILTER (WHERE lease_expires_at < now()) FROM executions_step WHERE status = 'RUNNING'
"""
DESTINATIONS = """
    SELECT d.name, w.slug,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING'
                AND s.holds_slot),
           (SELECT count(*) FROM executions_step s
            WHERE s.destination_id = d.id AND s.destination_id IS NOT NULL AND s.status = 'READY'
              AND s.due_at <= now())
           + (SELECT count(*) FROM executions_step s
              WHERE s.destination_id = d.id AND s.status = 'RUNNING' AND NOT s.holds_slot),
           d.concurrency_limit,
           CASE WHEN d.concurrency_mode = 'adaptive' THEN coalesce(d.concurrency_current, d.concurrency_min)
                ELSE coalesce(d.concurrency_current, d.concurrency_limit) END,
           d.breaker_state <> 'closed'
    FROM executions_destination d JOIN workflows_workspace w ON w.id = d.workspace_id
    ORDER BY w.slug, d.name
"""
PAYLOAD_BYTES = "SELECT coalesce(sum(bytes), 0) FROM executions_payloadusage"


def _gauge(name: str, doc: str, value: float | None, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}{name}", doc, labels=list(labels) or None)
    if value is not None and not labels:
        family.add_metric([], value)
    return family


class DatabaseCollector(Collector):
    """Gauges that are database state, read when scraped (see the module doc)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with connection.cursor() as cursor:
            cursor.execute(QUEUE)
            ready, scheduled, oldest = cursor.fetchone()
            cursor.execute(RUNNING)
            running, overdue = cursor.fetchone()
            cursor.execute(DESTINATIONS)
            destinations = cursor.fetchall()
            cursor.execute(PAYLOAD_BYTES)
            payload_bytes = cursor.fetchone()[0]
        yield _gauge("steps_ready", "Steps ready and due now: the queue the workers claim from.", ready)
        yield _gauge("timers_due", "Steps waiting for a due time still ahead (timers, retry back-offs, "
                                   "deferred fan-outs).", scheduled)
        yield _gauge("steps_ready_oldest_seconds", "How long the oldest due ready step has waited (0: none).",
                     float(oldest or 0.0))
        yield _gauge("steps_running", "Steps claimed and running (leased).", running)
        yield _gauge("leases_overdue", "Running steps whose lease has expired and awaits the reaper.", overdue)
        in_flight = _gauge("destination_in_flight", "Slots of a destination in use (its RUNNING steps that hold one).",
                           None, ["workspace", "destination"])
        waiting = _gauge("destination_waiting",
                         "Steps due for a destination waiting for a slot (READY, or queued in a worker).",
                         None, ["workspace", "destination"])
        limit = _gauge("destination_concurrency_limit", "A destination's concurrency limit (absent: unlimited).",
                       None, ["workspace", "destination"])
        current = _gauge("destination_concurrency_current", "The limit a destination's calls keep to now: adaptive "
                         "mode's current limit, or the ramp after a cooldown (absent: unlimited).",
                         None, ["workspace", "destination"])
        breaker_open = _gauge("destination_breaker_open", "1 while a destination's circuit breaker is open or "
                              "half-open, else 0.", None, ["workspace", "destination"])
        for name, workspace, running_calls, waiting_calls, concurrency, now_limit, is_open in destinations:
            in_flight.add_metric([workspace, name], running_calls)
            waiting.add_metric([workspace, name], waiting_calls)
            if concurrency is not None:
                limit.add_metric([workspace, name], concurrency)
            if now_limit is not None:
                current.add_metric([workspace, name], now_limit)
            breaker_open.add_metric([workspace, name], 1 if is_open else 0)
        yield from (in_flight, waiting, limit, current, breaker_open)
        yield _gauge("payload_bytes", "Bytes held by the payload store (S7).", int(payload_bytes))
        yield _gauge("payload_capacity_bytes", "The payload store's capacity (SB_PAYLOAD_CAPACITY_BYTES).",
                     int(settings.SB["PAYLOAD_CAPACITY_BYTES"]))
        yield _gauge("payload_high_water_ratio", "Fraction of capacity above which fan-outs are deferred.",
                     float(settings.SB["PAYLOAD_HIGH_WATER"]))
        yield _gauge("workers_alive", "qcluster worker processes heard from in the last 30 s.", live_workers())


# --- workers --------------------------------------------------------------------------------------

WORKER_FRESH_SECONDS = 30.0


def live_workers(within: float = WORKER_FRESH_SECONDS) -> int:
    """Worker processes of the running qclusters that published their status (django-q2's
    Stat, in the shared cache or Redis) within ``within`` seconds."""
    from django.utils import timezone
    from django_q.conf import Conf
    from django_q.status import Stat

    now = timezone.now()
    return sum(len(stat.workers) for stat in Stat.get_all()
               if stat.status not in (Conf.STOPPING, Conf.STOPPED)
               and (now - stat.timestamp).total_seconds() <= within)


# --- exposition -------------------------------------------------------------------------------

class _ThisProcess(Collector):
    """This process's own event metrics (no multiprocess directory); only ours, as in
    multiprocess mode (not prometheus-client's process and Python collectors)."""

    def collect(self) -> Iterator[Any]:
        yield from (family for family in REGISTRY.collect() if family.name.startswith(PREFIX))


def multiprocess_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()


def exposition() -> bytes:
    """Everything, in the Prometheus text format: the events of every process (summed over
    the multiprocess directory when there is one) and the database state."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(DatabaseCollector())
    return generate_latest(registry)

