"""Database errors that leave nothing written and succeed when tried again.

PostgreSQL ends a transaction it picks as a deadlock victim, or one that hit a
serialization failure; the work is fine, its moment was not. ``retrying`` runs a unit of
work (which opens its own transaction) again a few times for those, and only for those.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg.errors

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRIES = 8
TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


def is_transient(error: BaseException) -> bool:
    """A deadlock victim or a serialization failure (as psycopg raises it, or wrapped by Django)."""
    return isinstance(error, TRANSIENT) or isinstance(error.__cause__, TRANSIENT)


def retrying(work: Callable[[], T]) -> T:
    """Run ``work``; run it again (up to RETRIES times) while it fails transiently."""
    for attempt in range(1, RETRIES + 1):
        try:
            return work()
        except Exception as error:
            if not is_transient(error) or attempt == RETRIES:
                raise
            log.info("%s; trying again (%s/%s)", type(error.__cause__ or error).__name__, attempt, RETRIES)
            time.sleep(0.01 * attempt)  # let the other transaction finish; not a durable wait
    raise AssertionError("unreachable")
