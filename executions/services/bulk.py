"""Filtered bulk actions (issue 31 §5): retry or cancel the children of one parent that match
a filter, as a durable operation with an outcome ledger (``executions/core/bulk.py``).

``start`` checks the filter and the parent, and creates the operation with its ledger in one
transaction (the API answers 202 with its id); after commit a worker is asked to run it
(``platform.notify.bulk_created``; the tick and live drains take over one whose worker died).
``run`` runs one operation in batches of ``SB_BULK_BATCH`` children, each batch one transaction:

* **retry**: the parent's failFast lock, the operation row, then ``fanout/recovery.retry_some``
  over the batch — the very rules and locks of retry-failed (S9, S16, S28: FAILED children with
  a failed step, failFast's cancels when the merge failed, a stopped spawner re-opened, redrive)
  — and each child's outcome: ``done``, or ``skipped`` with why (``purged``, ``not failed any
  more``, ``failed on a FAIL vertex``, …);
* **cancel**: the same two locks, then the seal of the batch's unfinished children (their steps,
  then them: ``core/cancel.seal``) recorded ``sealed``; after commit, the sweep of everything
  under them (``cancel.sweep_under``, bounded transactions), then ``done``. A worker that dies
  between the two finds the ``sealed`` rows first when it (or another) resumes, and sweeps again
  (a sweep of a swept tree cancels nothing).

Lock order of a batch (docs/architecture.md): the parent's failFast lock (rule 0), the
operation row (only bulk batches lock it), then the engine's rows in their usual order, the
ledger rows last. Batches of one operation are therefore serial, and a bulk batch and a
retry-failed or a failFast sweep of the same parent exclude each other.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from executions import selectors
from executions.core import bulk, cancel
from executions.fanout import recovery
from executions.models import BulkAction, BulkOutcome, Execution, ExecutionStatus
from executions.platform import hosts, notify, transient
from executions.services import lifecycle
from workflows import sudo
from workflows.errors import Conflict, Invalid, ServiceError

MAX_INDEXES = 100_000
STATUSES = [status.value for status in ExecutionStatus]
# Terms that select children (``spawner`` only narrows them): a filter needs at least one.
SELECTING = ("status", "error_contains", "indexes", "error_signature", "item_keys")


@dataclass(frozen=True)
class Started:
    operation: uuid.UUID
    matched: int


def batch_size() -> int:
    return int(settings.SB["BULK_BATCH"])


def lease_seconds() -> float:
    return float(settings.SB["LEASE_SECONDS"])


def check_filter(terms: dict[str, Any]) -> dict[str, Any]:
    """The filter's terms, checked (``Invalid`` naming the field otherwise); absent terms dropped."""
    terms = {name: value for name, value in terms.items() if value is not None}
    unknown = sorted(set(terms) - set(bulk.TERMS))
    if unknown:
        raise Invalid(f"unknown filter term '{unknown[0]}'; the terms are {', '.join(sorted(bulk.TERMS))}",
                      errors=[{"field": name, "message": "not a filter term"} for name in unknown])
    if not any(name in terms for name in SELECTING):
        raise Invalid(f"give at least one filter term: {', '.join(SELECTING)}",
                      errors=[{"field": name, "message": "at least one of these is required"} for name in SELECTING])
    _check_values(terms)
    return terms


MAX_ITEM_KEY = 256  # as Execution.item_key


def _check_values(terms: dict[str, Any]) -> None:
    def bad(field: str, message: str) -> Invalid:
        return Invalid(f"{field}: {message}", errors=[{"field": field, "message": message}])

    status = terms.get("status")
    if status is not None and (not isinstance(status, list) or not status
                               or any(value not in STATUSES for value in status)):
        raise bad("status", f"a non-empty list of {', '.join(STATUSES)}")
    for field in ("error_contains", "error_signature", "spawner"):
        value = terms.get(field)
        if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 2000):
            raise bad(field, "a non-empty string of at most 2000 characters")
    indexes = terms.get("indexes")
    if indexes is not None and (not isinstance(indexes, list) or not indexes or len(indexes) > MAX_INDEXES
                                or any(type(i) is not int or not 0 <= i < 2**31 for i in indexes)):
        raise bad("indexes", f"a non-empty list of at most {MAX_INDEXES:,} item indexes (integers ≥ 0)")
    keys = terms.get("item_keys")
    if keys is not None and (not isinstance(keys, list) or not keys or len(keys) > MAX_INDEXES
                             or any(not isinstance(k, str) or not 0 < len(k) <= MAX_ITEM_KEY for k in keys)):
        raise bad("item_keys", f"a non-empty list of at most {MAX_INDEXES:,} item keys (strings of 1 to "
                               f"{MAX_ITEM_KEY} characters)")


def start(parent: Execution, action: str, terms: dict[str, Any], *, actor: str = "",
          system_actor: sudo.VerifiedActor | None = None) -> Started:
    """Create a bulk ``action`` (retry, cancel) of ``parent``'s children matching ``terms``; it
    runs on the workers. Refused (``Conflict``) for a cancelled parent or ancestor (retry)."""
    if action not in BulkAction.values:
        raise Invalid(f"unknown bulk action '{action}'")
    terms = check_filter(terms)
    lifecycle.guard(parent, system_actor, "retrying executions of" if action == BulkAction.RETRY
                    else "cancelling executions of")
    if action == BulkAction.RETRY:
        if parent.status == ExecutionStatus.CANCELLED:
            raise Conflict("the execution was cancelled; its children cannot be retried")
        ancestor = selectors.executions.cancelled_ancestor(parent.pk)
        if ancestor is not None:
            raise Conflict(f"its ancestor {ancestor} was cancelled")
    with transaction.atomic(), connection.cursor() as cursor:
        operation, matched = bulk.create(cursor, workspace=parent.workspace_id, parent=parent.pk, action=action,
                                         terms=terms, actor=actor)
        if matched:
            notify.bulk_created()
    return Started(operation, matched)


def worker_name() -> str:
    return f"{hosts.worker_host()}:{os.getpid()}"


def run_due(*, max_operations: int = 100) -> int:
    """Run operations that no live worker runs, one after the other; returns how many finished."""
    finished = 0
    for _ in range(max_operations):
        worker = worker_name()
        with transaction.atomic(), connection.cursor() as cursor:
            claimed = bulk.claim(cursor, worker=worker, lease_seconds=lease_seconds())
        if claimed is None:
            return finished
        finished += run(claimed, worker)
    return finished


def orphaned() -> bool:
    """Whether an operation waits for a worker (the tick's and drains' question)."""
    with connection.cursor() as cursor:
        return bulk.orphaned(cursor)


def run(claimed: bulk.Claimed, worker: str) -> bool:
    """Run a claimed operation to its end (or until another worker took it over); True if it
    finished here."""
    act = _retry_batch if claimed.action == BulkAction.RETRY else _cancel_batch
    message = f"{claimed.action} by {claimed.actor or 'an operator'} (bulk operation {claimed.id})"
    if claimed.action == BulkAction.CANCEL:
        _sweep_sealed(claimed, worker, message)
    while True:
        more = transient.retrying(lambda: act(claimed, worker, message))
        if claimed.action == BulkAction.CANCEL:
            _sweep_sealed(claimed, worker, message)
        if more is None:
            return False
        if not more:
            with transaction.atomic(), connection.cursor() as cursor:
                return bulk.finish_if_done(cursor, claimed.id)


def _retry_batch(claimed: bulk.Claimed, worker: str, message: str) -> bool | None:
    """One retry batch; True if rows were left to look at, False if none, None if not ours."""
    with transaction.atomic(), connection.cursor() as cursor:
        cancel.lock_fail_fast(cursor, claimed.parent)  # rule 0: first
        if not bulk.lock(cursor, claimed.id, worker):
            return None
        rows = bulk.next_batch(cursor, claimed.id, batch_size())
        if not rows:
            return False
        children = [child for _, child in rows]
        why = bulk.why_not_retried(cursor, claimed.parent, children)
        runnable = [child for child in children if why[child] is None]
        retried, refused = _retry_some(cursor, claimed.parent, runnable, message)
        if retried:
            notify.work_created(cursor)
        why |= {child: refused for child in runnable} if refused else {}
        # A child the retry's own rules passed over (e.g. a failFast cancel whose merge has not
        # failed) is skipped as no longer failed.
        outcomes = [(position, BulkOutcome.DONE, "") if child in retried
                    else (position, BulkOutcome.SKIPPED, why[child] or bulk.NOT_RETRIED)
                    for position, child in rows]
        bulk.record(cursor, claimed.id, outcomes, lease_seconds=lease_seconds())
        return True


def _retry_some(cursor: Any, parent: uuid.UUID, children: list[uuid.UUID], message: str
                ) -> tuple[set[uuid.UUID], str]:
    """The batch's retry in a savepoint: a refusal (a tree retention began to purge while the
    batch ran, S19) skips the batch's children with its reason instead of failing the operation."""
    if not children:
        return set(), ""
    try:
        with transaction.atomic():
            return recovery.retry_some(cursor, parent, children, message=message), ""
    except ServiceError as error:
        return set(), bulk.PURGED if "retention" in error.message else error.message


def _cancel_batch(claimed: bulk.Claimed, worker: str, message: str) -> bool | None:
    """One cancel batch: seal the batch's unfinished children (``sealed``), skip the others."""
    with transaction.atomic(), connection.cursor() as cursor:
        cancel.lock_fail_fast(cursor, claimed.parent)  # rule 0: first (as a retry of this parent)
        if not bulk.lock(cursor, claimed.id, worker):
            return None
        rows = bulk.next_batch(cursor, claimed.id, batch_size())
        if not rows:
            return False
        sealed = cancel.seal(cursor, [child for _, child in rows], message=message)
        why = bulk.why_not_cancelled(cursor, [child for _, child in rows if child not in sealed])
        outcomes = [(position, BulkOutcome.SEALED, "") if child in sealed
                    else (position, BulkOutcome.SKIPPED, why.get(child, bulk.PURGED)) for position, child in rows]
        bulk.record(cursor, claimed.id, outcomes, lease_seconds=lease_seconds())
        return True


def _sweep_sealed(claimed: bulk.Claimed, worker: str, message: str) -> None:
    """Sweep under the children a cancel batch sealed, then mark them done."""
    while True:
        with connection.cursor() as cursor:
            rows = bulk.next_batch(cursor, claimed.id, batch_size(), BulkOutcome.SEALED)
        if not rows:
            return
        cancel.sweep_under([child for _, child in rows], message=message)
        with transaction.atomic(), connection.cursor() as cursor:
            if not bulk.lock(cursor, claimed.id, worker):
                return
            bulk.record(cursor, claimed.id, [(position, BulkOutcome.DONE, "") for position, _ in rows],
                        lease_seconds=lease_seconds(), from_=BulkOutcome.SEALED)
