"""The django-q2 task functions (re-exported as ``executions.worker.drain`` and ``.tick``:
queued tasks and schedules name them so) and the worker process's start-up hook.

``drain`` is the only task that runs steps. It takes a drain slot (slots.py), runs a drain
(loop.Drain) until it is idle or out of time, and hands over to a fresh task while work or
timers remain. ``tick`` runs on a django-q2 schedule (every minute): reap, run a bounded
retention pass (the one ``sb_gc`` runs, S19), expire uploads and worker registrations,
start due cron schedules (executions/services/schedules.py), and make sure a drain runs when work is
due. Cluster start-up (``post_spawn``: ``on_worker_spawn``) tunes the interpreter, starts
due schedules and kicks too.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection, transaction

from executions import kick, registry
from executions.core import retention
from executions.engine import runner as engine
from executions.services import bulk as bulk_operations
from executions.services import schedules, uploads
from executions.worker import commits, interpreter, slots
from executions.worker.housekeeping import resume_bulk, work_pending
from executions.worker.loop import DOWN_FOR_GOOD, Drain

log = logging.getLogger(__name__)


def drain() -> int:
    """Task: drain ready steps while there is work; returns how many steps it finished."""
    close_old_connections()
    try:
        slot = slots.take()
    except (OperationalError, InterfaceError):
        log.warning("database unavailable; this drain ends and a later kick or tick retries")
        connection.close()
        return 0
    if slot is None:
        return 0
    done = 0
    try:
        done = _drain_resiliently(slot)
    finally:
        slots.release(slot)
        # Hand over while work or timers remain, and close the race with kicks that found
        # every slot taken just before we left.
        try:
            if work_pending():
                kick.request_drain(force=True)
        except DatabaseError:
            log.warning("could not re-check for due work after the drain")
    return done


def _drain_resiliently(slot: int) -> int:
    """Run a drain in ``slot``; one that gave up on a database gone for good ends this task
    (a later kick or the tick starts another)."""
    try:
        return Drain(slot=slot).run()
    except commits.CONNECTION_LOST as error:
        log.warning("the database was unavailable for %ss; this drain ends (%s)", DOWN_FOR_GOOD, error)
        connection.close()
        return 0


def bulk() -> int:
    """Task: run the bulk operations (issue 31 §5) that no live worker runs, to their end;
    returns how many finished. A worker killed during one leaves its lease to expire; the
    tick or a drain then enqueues this task again and it resumes at the ledger's next row."""
    close_old_connections()
    return bulk_operations.run_due()


def tick() -> dict[str, Any]:
    """Scheduled task: start due schedules (first: nothing below may make a fire late), reap
    expired leases, run a retention pass bounded by ``RETENTION_TICK_SECONDS`` (the one
    ``sb_gc`` runs, S19), apply upload retention, delete expired worker registrations, wake a
    drain if due."""
    close_old_connections()
    scheduled = schedules.fire_due()
    requeued, failed_steps = engine.reap()
    gc = retention.run_pass(max_seconds=float(settings.SB["RETENTION_TICK_SECONDS"]))
    with transaction.atomic(), connection.cursor() as cursor:
        workers_expired = registry.expire(cursor)
        uploads_deleted = uploads.apply_retention(cursor)
    if work_pending():
        kick.request_drain(force=True)
    resume_bulk()
    return {"requeued": requeued, "failed": failed_steps, **gc.as_dict(), "calls_deleted": gc.calls_deleted,
            "uploads_deleted": uploads_deleted,
            "workers_expired": workers_expired, "scheduled": scheduled}


def on_worker_spawn(sender: Any = None, **kwargs: Any) -> None:
    """django-q2 ``post_spawn``: a (re)started worker process tunes its interpreter
    (interpreter.py), registers itself (a heartbeat thread keeps it registered: the drain
    slots follow the live workers), asks for a drain, and starts the schedules that came due
    while the workers were down (not a minute later, at the tick)."""
    interpreter.tune()
    try:
        close_old_connections()
        registry.start_heartbeat(cluster=f"{settings.Q_CLUSTER.get('name', '')}:{os.getppid()}")
        kick.request_drain(force=True)
    except Exception:
        log.exception("could not kick a drain at worker start")
    try:
        schedules.fire_due()
    except Exception:
        log.exception("could not start due schedules at worker start (the tick retries)")
