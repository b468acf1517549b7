"""Drain slots: session advisory locks, one per live worker process (registry.py), so at
most that many drains run, and PostgreSQL frees a killed worker's slot with its session."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection

from executions import kick, registry

log = logging.getLogger(__name__)

TRY_SLOT = "SELECT pg_try_advisory_lock(%(class)s, %(slot)s)"
RELEASE_SLOT = "SELECT pg_advisory_unlock(%(class)s, %(slot)s)"


def backend_pid() -> int | None:
    """The backend of this thread's database session (None: not connected)."""
    return connection.connection.info.backend_pid if connection.connection is not None else None


def take() -> int | None:
    """Take a free drain slot, or None."""
    with connection.cursor() as cursor:
        for slot in range(registry.drain_slots(cursor)):
            cursor.execute(TRY_SLOT, {"class": kick.ADVISORY_CLASS, "slot": slot})
            if cursor.fetchone()[0]:
                return slot
    return None


def release(slot: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(RELEASE_SLOT, {"class": kick.ADVISORY_CLASS, "slot": slot})
    except DatabaseError:
        log.warning("could not release drain slot %s (the connection is gone, so is the lock)", slot)
