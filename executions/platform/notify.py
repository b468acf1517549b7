"""Telling workers that work became ready, without knowing who the workers are.

``work_created`` is called inside the transaction that made work ready (a new step, a step
due again, a merge its children decided). It sends ``NOTIFY sb_work`` — PostgreSQL delivers
it at commit and folds duplicates within a transaction, so idle drains listening on
``CHANNEL`` wake at once — and, after commit, calls the wake-up listeners. The worker layer
registers one at start-up (``executions.apps``: enqueue a drain task, coalesced); the layers
below it therefore never import the worker. A rolled-back transaction wakes nobody.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

CHANNEL = "sb_work"
NOTIFY = "SELECT pg_notify('sb_work', '')"

_listeners: list[Callable[[], Any]] = []


def on_work_created(listener: Callable[[], Any]) -> None:
    """Call ``listener()`` after each commit that made work ready (registered once per process)."""
    if listener not in _listeners:
        _listeners.append(listener)


def work_created(cursor: Any) -> None:
    """Call inside a transaction that made work ready."""
    cursor.execute(NOTIFY)
    transaction.on_commit(_wake)


def _wake() -> None:
    for listener in _listeners:
        listener()


_bulk_listeners: list[Callable[[], Any]] = []


def on_bulk_created(listener: Callable[[], Any]) -> None:
    """Call ``listener()`` after each commit that created a bulk operation (services/bulk.py);
    the worker layer registers one that asks a worker to run it."""
    if listener not in _bulk_listeners:
        _bulk_listeners.append(listener)


def bulk_created() -> None:
    """Call inside the transaction that created a bulk operation."""
    transaction.on_commit(lambda: [listener() for listener in _bulk_listeners])
