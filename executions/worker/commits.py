"""Committing a drain's finished steps, and what happens to them when that fails.

``commit`` writes a batch of results in one fenced transaction (engine.commit), with the call
log of the steps that ran on the event loop and the hand-over of their destination slots to
the queued steps that started in them. On an error:

* a deadlock or serialization failure: nothing was written; tried again at once
  (transient.retrying);
* a lost connection: nothing was written; the results are kept and committed once the
  database is back (within their lease), so no attempt is used — past half a lease, the
  error is raised to the drain, which waits the database out (loop.Drain.run);
* any other database error: a result the database refuses (a value it cannot store): the
  batch is split until that result is alone, every other result is committed, and its step
  fails with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction

from executions.core import calls as call_log
from executions.core import flow, leases, state
from executions.core.outcomes import Outcome, failed
from executions.core.runs import StepRun
from executions.engine import runner as engine
from executions.platform import metrics, transient

log = logging.getLogger(__name__)

Results = Sequence[tuple[StepRun, Outcome]]

# A lost database connection, seen through Django's connection or the drain's own LISTEN
# connection (plain psycopg: an idle drain meets a restart there first).
CONNECTION_LOST = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def connection_lost(error: BaseException) -> bool:
    """Whether ``error`` is about the connection or the server rather than the data: the
    drain then reconnects and tries again instead of failing anything. Deadlocks and
    serialization failures are retried in place (transient.py); data, integrity and
    programming errors are a result's own fault."""
    return isinstance(error, CONNECTION_LOST) and not transient.is_transient(error)


def commit(results: Results, takers: Sequence[leases.Lease] = (), versions: dict[int, int] | None = None,
           blocked: dict[int, float] | None = None) -> set[int]:
    """Commit ``results`` (see the module doc); returns the step ids of ``takers`` — queued
    steps running in the slots of finished ones — that took those slots over. ``versions``
    receives the config version of each destination where one did (leases.take_over_slots),
    ``blocked`` the seconds until calls may start again at each destination whose flow state
    the commit read (0: now; more: cooling down or breaker open; flow.judged,
    leases.take_over_slots)."""
    try:
        return commit_or_wait(results, takers, versions, blocked)
    except DatabaseError as error:
        if connection_lost(error):
            raise
        commit_apart(results, error)
        return _take_over_apart(takers, versions)


def commit_or_wait(results: Results, takers: Sequence[leases.Lease] = (),
                   versions: dict[int, int] | None = None, blocked: dict[int, float] | None = None) -> set[int]:
    """One transaction, tried again on a transient error and across a lost connection for up
    to half a lease; a refused result raises."""
    give_up_at = time.monotonic() + leases.lease_seconds() / 2
    pause = 0.1
    while True:
        try:
            return transient.retrying(lambda: commit_once(results, takers, versions, blocked))
        except DatabaseError as error:
            if not connection_lost(error) or time.monotonic() > give_up_at:
                raise
            log.warning("database connection lost committing %s results (%s); retrying in %.1fs",
                        len(results), error, pause)
            connection.close()
            time.sleep(pause)  # reconnection back-off, bounded by the results' leases
            pause = min(pause * 2, 2.0)


def commit_once(results: Results, takers: Sequence[leases.Lease] = (),
                versions: dict[int, int] | None = None, blocked: dict[int, float] | None = None) -> set[int]:
    """One attempt: the results, their call log, their destinations' flow state (which may
    turn a throttled step's failure into a wait: flow.judged, flow.settle) and the slot take-over in one
    transaction.

    The fan-out counters come last, so their row — the one every worker's commit of a
    fan-out's children updates — is locked only from that update to COMMIT
    (state.FanoutCounts)."""
    calls = [row for run, _ in results for row in run.extra.get("calls", ())]
    counts = state.FanoutCounts()
    with metrics.timed(metrics.COMMIT_SECONDS), transaction.atomic(), connection.cursor() as cursor:
        call_log.record_calls(calls, cursor=cursor)  # first: the flow window's p90 reads them
        judged, pending = flow.judged(cursor, results, blocked)
        engine.commit(cursor, judged, counts=counts)
        taken = leases.take_over_slots(cursor, list(takers), versions, blocked)
        flow.settle(cursor, pending, blocked)  # late: a destination row it locks is locked until COMMIT
        counts.apply(cursor)
        return taken


def commit_apart(results: Results, error: DatabaseError) -> None:
    """Split a refused batch until the refused result is alone; commit the others; fail it."""
    if len(results) == 1:
        _fail_refused(results[0][0], error)
        return
    middle = len(results) // 2
    for half in (results[:middle], results[middle:]):
        try:
            commit_or_wait(half)
        except DatabaseError as refused:
            if connection_lost(refused):
                raise
            commit_apart(half, refused)


def _fail_refused(run: StepRun, error: DatabaseError) -> None:
    # Its call log is written on its own (best effort): it may be what was refused.
    call_log.record_calls(run.extra.pop("calls", []))
    metrics.drain_error("result_refused")
    log.error("step %s (%s): its result could not be recorded: %s", run.step_id, run.vertex.id, error)
    refused = failed(f"its result could not be recorded ({type(error).__name__}: {error})"[:2000], retryable=False)
    try:
        commit_or_wait([(run, refused)])
    except DatabaseError as again:
        if connection_lost(again):
            raise
        log.error("step %s: not even its failure could be recorded (%s); its lease will expire", run.step_id, again)


def _take_over_apart(takers: Sequence[leases.Lease], versions: dict[int, int] | None = None) -> set[int]:
    """After a commit split apart (a refused result): the slot take-over on its own."""
    if not takers:
        return set()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            return leases.take_over_slots(cursor, list(takers), versions)
    except DatabaseError:
        log.warning("could not hand %s slots over; their queued steps run on in them", len(takers))
        return set()
