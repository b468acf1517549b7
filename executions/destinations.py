"""Destination bookkeeping: the call log behind the Rate Limits page's error rate and
latency, and the live counts (in flight, waiting) per destination."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection

log = logging.getLogger(__name__)

RECORD_CALL = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    VALUES (%(destination)s, %(step)s, %(status)s, %(ok)s, %(latency)s, %(error)s, now())
"""

LIVE_COUNTS = """
    SELECT d.id,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'RUNNING') AS in_flight,
           (SELECT count(*) FROM executions_step s WHERE s.destination_id = d.id AND s.status = 'READY'
                AND s.due_at <= now()) AS waiting,
           (SELECT count(*) FROM executions_destinationcall c WHERE c.destination_id = d.id
                AND c.created_at > now() - interval '5 minutes') AS calls,
           (SELECT count(*) FROM executions_destinationcall c WHERE c.destination_id = d.id
                AND c.created_at > now() - interval '5 minutes' AND NOT c.ok) AS errors,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY c.latency_ms) FROM executions_destinationcall c
                WHERE c.destination_id = d.id AND c.created_at > now() - interval '5 minutes') AS p50_ms,
           (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY c.latency_ms) FROM executions_destinationcall c
                WHERE c.destination_id = d.id AND c.created_at > now() - interval '5 minutes') AS p95_ms
    FROM executions_destination d WHERE d.id = ANY(%(ids)s)
"""


def record_call(destination_id: int, step_id: int, status_code: int | None, seconds: float, error: str) -> None:
    """Log one outbound call (its own short autocommit statement; never fails the step)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(RECORD_CALL, {
                "destination": destination_id, "step": step_id, "status": status_code,
                "ok": status_code is not None and status_code < 400, "latency": seconds * 1000.0,
                "error": error[:500],
            })
    except Exception:
        log.exception("could not record a call to destination %s", destination_id)


def live_counts(destination_ids: list[int]) -> dict[int, dict[str, Any]]:
    if not destination_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(LIVE_COUNTS, {"ids": destination_ids})
        names = [column.name for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}
