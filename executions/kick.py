"""Waking workers when work appears (coalesced).

* ``NOTIFY sb_work`` inside the transaction that created ready work (``platform.notify``):
  PostgreSQL delivers it at commit (and folds duplicates within a transaction), waking idle
  drains at once.
* After commit (``platform.notify`` calls it; apps.py registers it), ``request_drain``
  enqueues a django-q2 drain task — but only if fewer drains are alive than there are drain
  slots (one per live worker process, registry.py; drains hold a session advisory lock each,
  so a killed worker's slot frees itself) and none was enqueued in the last 250 ms (one
  guarded UPDATE on a single row). A burst of thousands of commits therefore makes a few tasks.
"""

from __future__ import annotations

import logging
import time

from django.db import connection

from executions import registry

log = logging.getLogger(__name__)

ADVISORY_CLASS = 7_318_001  # pg_locks.classid of the drain slots
# (7_318_002: a drain that abstains, worker/roles.py; 7_318_003: a parent's failFast lock,
# executions/core/cancel.py, transaction-level, never a drain's.)

# Enqueue a drain only when a slot is free and no drain was enqueued very recently.
THROTTLE = f"""
    WITH row AS (
        INSERT INTO executions_drainkick (id, last_enqueued_at) VALUES (1, now() - interval '1 hour')
        ON CONFLICT (id) DO NOTHING
    )
    UPDATE executions_drainkick SET last_enqueued_at = now()
    WHERE id = 1 AND last_enqueued_at < now() - interval '250 milliseconds'
      AND (SELECT count(*) FROM pg_locks
           WHERE locktype = 'advisory' AND classid = %(class)s AND objsubid = 2 AND granted) < {registry.SLOTS}
    RETURNING id
"""  # noqa: S608 - constant SQL

_last_request = 0.0


def request_drain(force: bool = False) -> bool:
    """Enqueue a drain task if a slot is free (see module doc); returns True if enqueued."""
    global _last_request
    now = time.monotonic()
    if not force and now - _last_request < 0.1:
        return False
    _last_request = now
    try:
        with connection.cursor() as cursor:
            cursor.execute(THROTTLE, {"class": ADVISORY_CLASS, **registry.slot_params()})
            if cursor.fetchone() is None:
                return False
        from django_q.tasks import async_task

        async_task("executions.worker.drain", task_name="sb-drain")
        return True
    except Exception:
        # Never let a wake-up fail the caller: the scheduled tick and live drains recover.
        log.exception("could not enqueue a drain task")
        return False


def request_bulk() -> bool:
    """Enqueue a task that runs the bulk operations no worker runs (services/bulk.py); True if
    enqueued. Never fails the caller: the tick and live drains look for orphaned operations."""
    try:
        from django_q.tasks import async_task

        async_task("executions.worker.bulk", task_name="sb-bulk")
        return True
    except Exception:
        log.exception("could not enqueue a bulk operation task")
        return False
