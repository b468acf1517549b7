"""The destination call log, and what a claimed HTTP step needs to know of its destination.

Each outbound call leaves a row in ``executions_destinationcall`` (the Rate Limits page's error
rate and latency; metrics count it too). The drain writes the rows of the calls made on its
event loop inside the commit of their results (``record_calls`` with the commit's cursor);
``record_call`` writes one on its own and never fails the step. Retention deletes old rows
(``purge_calls``). Credentials come sealed (executions/destinations/credentials.py opens them).

**Copies** (issue 28, section 4). A drain keeps what FOR_CALLS read — its copy of a
destination's call settings — for the steps it queues for a slot, and a queued step starts its
call when a slot frees, without a round trip. So that a change of the settings reaches every
call that starts after the change has returned, a copy is a lease:

* it may start calls for ``COPY_SECONDS`` from the moment the statement that read or
  confirmed it was sent (FOR_CALLS; the slot take-over of a commit, which returns the
  destination's ``config_version``, confirms a copy of the same version and retires an older
  one); after that the drain reads it again before it starts anything with it;
* a change of a column FOR_CALLS reads bumps ``config_version`` (a trigger, migration 0021)
  and, when the destination has RUNNING steps, returns only after ``COPY_SECONDS`` plus a
  margin (``outlive_copies``): by then every copy that was read before the change has lapsed.
  With no step RUNNING no drain can start a call with an older copy: a claim reads the
  settings in its own transaction, after locking the destination row the change updates.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import connection

from executions.core import flow
from executions.platform import metrics

log = logging.getLogger(__name__)

# What an HTTP step needs of its destination, for the claimed steps' destinations. A change of
# any of these columns bumps config_version (the trigger of migration 0021 lists the same ones).
# With them, what the drain needs of its flow control (executions/core/flow.py): whether a
# commit must record its calls' flow (``flow``), and until when no call may start (``blocked_for``
# seconds). They change without a new config_version: a copy learns them when it is read again
# (within COPY_SECONDS) or at its drain's next slot take-over (leases.TAKE_OVER_SLOTS).
FOR_CALLS = f"""
    SELECT id, name, base_url, timeout_seconds, max_response_bytes, credentials_sealed, config_version,
           concurrency_mode, max_throttled_waits, max_cooldown_seconds,
           (concurrency_mode = 'adaptive' OR breaker IS NOT NULL OR concurrency_current IS NOT NULL
            OR throttle_streak > 0 OR breaker_state <> 'closed') AS flow,
           {flow.BLOCKED_FOR} AS blocked_for
    FROM executions_destination d WHERE id = ANY(%(ids)s)
"""  # noqa: S608 - constant SQL

# Whether a drain may hold a copy of the destination's settings that can still start a call:
# only for a step it has claimed and not yet finished (see "Copies" above).
IN_USE = """
    SELECT EXISTS (SELECT 1 FROM executions_step WHERE destination_id = %(id)s AND status = 'RUNNING')
"""

# How long a copy may start calls after the statement that read or confirmed it was sent; a
# change waits as long (and COPY_MARGIN for clocks that run at slightly different rates, and
# for the moment between a copy's check and the call's use of it) before it returns.
COPY_SECONDS = 1.0
COPY_MARGIN = 0.1
# How long a copy may start calls after a statement last told it the destination's flow state
# (FOR_CALLS, a commit's slot take-over: leases.TAKE_OVER_SLOTS, or the commit's reading of its
# calls' flow: flow.judged), so that a cooldown another drain's throttled answer started stops
# this drain's calls that soon at the latest (issue 29) — usually at its next commit. Under
# load every commit tells it; otherwise the drain reads the copy again (a cheap SELECT). Longer
# than a commit takes on a busy machine: a copy that lapses while its drain commits holds its
# queued steps back until the commit is over (at 0.1 s, bench flow capacity's calls in flight
# fell from 25 to 20 of a limit near 32).
FLOW_SECONDS = 0.5

# One row of the call log (the Rate Limits page's error rate and latency).
RECORD_CALL = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    VALUES (%(destination)s, %(step)s, %(status)s, %(ok)s, %(latency)s, %(error)s, now())
"""

def for_calls(cursor: Any, destination_ids: list[int]) -> dict[int, dict[str, Any]]:
    """id → {id, name, base_url, timeout_seconds, max_response_bytes, credentials_sealed,
    config_version} (FOR_CALLS)."""
    if not destination_ids:
        return {}
    cursor.execute(FOR_CALLS, {"ids": destination_ids})
    names = [column.name for column in cursor.description]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def copies_in_use(cursor: Any, destination_id: int) -> bool:
    """Whether a drain may start a call of this destination with a copy it holds (IN_USE)."""
    cursor.execute(IN_USE, {"id": destination_id})
    return bool(cursor.fetchone()[0])


def outlive_copies() -> None:
    """Wait until every copy read before now has lapsed (see "Copies" above): called after a
    change of the settings commits, so that the change returns only once no call can start
    with the old ones. A request-scoped wait of about a second, not a worker's."""
    time.sleep(COPY_SECONDS + COPY_MARGIN)


def record_call(destination_id: int, step_id: int, status_code: int | None, seconds: float, error: str) -> None:
    """Log one outbound call (its own short autocommit statement; never fails the step)."""
    metrics.destination_calls([(destination_id, step_id, status_code, seconds, error)])
    try:
        with connection.cursor() as cursor:
            cursor.execute(RECORD_CALL, {
                "destination": destination_id, "step": step_id, "status": status_code,
                "ok": status_code is not None and status_code < 400, "latency": seconds * 1000.0,
                "error": error[:500],
            })
    except Exception:
        log.exception("could not record a call to destination %s", destination_id)


RECORD_CALLS = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    SELECT c.destination, c.step, c.status, c.status IS NOT NULL AND c.status < 400, c.latency, c.error, now()
    FROM unnest(%(destination)s::bigint[], %(step)s::bigint[], %(status)s::int[], %(latency)s::float8[],
                %(error)s::text[]) AS c(destination, step, status, latency, error)
"""


def record_calls(rows: list[tuple[int, int, int | None, float, str]], *, cursor: Any = None) -> None:
    """Log many outbound calls ``(destination_id, step_id, status_code, seconds, error)`` in one
    statement (the drain, for calls made on its event loop).

    Given ``cursor``, the rows go into the caller's transaction (the drain's commit of those
    calls' results) and an error is the caller's; without one, they are written on their own
    and an error is logged, never raised: the log never fails a step."""
    if not rows:
        return
    params: dict[str, Any] = {
        "destination": [row[0] for row in rows], "step": [row[1] for row in rows],
        "status": [row[2] for row in rows], "latency": [row[3] * 1000.0 for row in rows],
        # PostgreSQL's text cannot hold NUL; a server's answer may.
        "error": [row[4][:500].replace("\x00", "\ufffd") for row in rows],
    }
    if cursor is not None:
        cursor.execute(RECORD_CALLS, params)
        metrics.destination_calls(rows)
        return
    try:
        with connection.cursor() as own:
            own.execute(RECORD_CALLS, params)
        metrics.destination_calls(rows)
    except Exception:
        log.exception("could not record %s outbound calls", len(rows))


# Old call-log rows of one destination, oldest first, read through call_destination_recent.
DELETE_OLD_CALLS = """
    DELETE FROM executions_destinationcall WHERE id IN (
        SELECT id FROM executions_destinationcall
        WHERE destination_id = %(destination)s AND created_at < now() - make_interval(secs => %(age)s)
        ORDER BY created_at
        LIMIT %(limit)s)
"""


def purge_calls(cursor: Any, destination_id: int, *, age_seconds: float, limit: int) -> int:
    """Delete up to ``limit`` call-log rows of a destination older than ``age_seconds`` (the
    Rate Limits page reads the last five minutes; the log is kept for
    ``SB_CALL_LOG_RETENTION_SECONDS`` for inspection, then goes with the retention pass)."""
    cursor.execute(DELETE_OLD_CALLS, {"destination": destination_id, "age": age_seconds, "limit": limit})
    return int(cursor.rowcount)

