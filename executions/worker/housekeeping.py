"""A drain's chores between its claims and commits: the heartbeat of its leases (and the
fence-off of steps another worker took), reaping, showing long steps' executions RUNNING,
waiting for work while idle (LISTEN and the next due time, never a fixed sleep), and
noticing that its cluster stops."""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import psycopg
from django.db import DatabaseError, connection, transaction

from executions import kick
from executions.core import flow_history, leases, pauses
from executions.core.records import NO_DUE_TIME
from executions.engine import runner as engine
from executions.platform import notify
from executions.services import bulk as bulk_operations
from executions.worker.futures import StepFuture
from executions.worker.gates import Gates
from executions.worker.inflight import InFlight, InFlightSteps
from executions.worker.policy import CLAIM_RETRY

log = logging.getLogger(__name__)

REAP_EVERY = 5.0  # seconds between reaper runs inside a live drain
STOP_CHECK_EVERY = 1.0  # seconds between checks that our cluster is stopping
SHUTDOWN_GRACE = 3.0  # seconds in-flight steps get to finish when the cluster stops
SHOW_RUNNING_AFTER = 0.5  # seconds a step runs before its execution is shown RUNNING
IDLE_WAKE = 2.0  # an idle drain looks up at least this often (a stopping cluster, reaping)

# The next moment something becomes due: a READY step's due time, a RUNNING step's lease
# expiry (its worker may be dead; then the reaper must run), or a WAITING step's deadline (its
# wait for a callback or an event times out: the reaper's sweep). least() skips NULLs.
# The idle drain's and the tick's questions. Each branch matches the predicate of one partial
# index (models.Step: step_claim_free, step_claim_destination, step_running_lease,
# step_waiting_due), so they read only READY/RUNNING/WAITING rows however many steps have
# finished (issue 14 §7). A step waiting for a signal (a merge) has no deadline: its due time
# is records.NO_DUE_TIME, past the end of the WAITING branch's range.
# Paused work (issue 31) counts for neither: a paused tree's, workspace's or destination's due
# steps must not keep a drain claiming in vain; the resume wakes one (pauses.py). A wait's
# deadline in a paused tree still counts: its timeout is the reaper's, paused or not.
_WAIT_DEADLINES = f"executions_step WHERE status = 'WAITING' AND due_at < '{NO_DUE_TIME}'::timestamptz"
NEXT_DUE = f"""
    SELECT extract(epoch FROM least(
        (SELECT min(due_at) FROM executions_step WHERE status = 'READY' AND destination_id IS NULL
            AND {pauses.CLAIMABLE_STEP}),
        (SELECT min(due_at) FROM executions_step WHERE status = 'READY' AND destination_id IS NOT NULL
            AND {pauses.CLAIMABLE_STEP} AND {pauses.DESTINATION_NOT_PAUSED}),
        (SELECT min(lease_expires_at) FROM executions_step WHERE status = 'RUNNING'),
        (SELECT min(due_at) FROM {_WAIT_DEADLINES})) - now())
"""  # noqa: S608 - constant SQL
WORK_PENDING = f"""
    SELECT EXISTS (SELECT 1 FROM executions_step WHERE status = 'READY' AND destination_id IS NULL
                   AND {pauses.CLAIMABLE_STEP})
        OR EXISTS (SELECT 1 FROM executions_step WHERE status = 'READY' AND destination_id IS NOT NULL
                   AND {pauses.CLAIMABLE_STEP} AND {pauses.DESTINATION_NOT_PAUSED})
        OR EXISTS (SELECT 1 FROM executions_step WHERE status = 'RUNNING')
        OR EXISTS (SELECT 1 FROM {_WAIT_DEADLINES})
"""  # noqa: S608 - constant SQL
# The next wait deadline alone: a busy drain reaps when it comes (not only every REAP_EVERY).
NEXT_WAIT_DEADLINE = f"SELECT extract(epoch FROM (SELECT min(due_at) FROM {_WAIT_DEADLINES}) - now())"  # noqa: S608


class Housekeeping:
    """The heartbeat, the reaper, the RUNNING display and the flow samples of the Rate Limits
    page's charts (flow_history.sample), each on its own period. The reaper also runs when the
    next wait deadline it knows of comes (a wait's timeout or heartbeat deadline is a due time,
    like a timer's: S12), learnt after each reaper run and after a commit that made steps wait
    (``waits_changed``)."""

    def __init__(self) -> None:
        self.last_heartbeat = self.last_reap = self.last_sample = 0.0
        self.wait_due = math.inf  # monotonic time of the next wait deadline
        self.wait_due_known = False

    def run(self, steps: InFlightSteps, gates: Gates) -> None:
        now = time.monotonic()
        if steps and now - self.last_heartbeat > leases.lease_seconds() / 3:
            self.last_heartbeat = now
            with connection.cursor() as cursor:
                kept = leases.heartbeat(cursor, [e.run.claimed.lease for e in steps])
            gates.renewed(now)
            if lost := steps.lost(kept):
                fence_off(steps, lost)
        gates.prune()
        if not self.wait_due_known:
            self.learn_wait_due()
        if now - self.last_reap > min(REAP_EVERY, leases.lease_seconds() / 2) or now >= self.wait_due:
            self.last_reap = now
            engine.reap()
            self.learn_wait_due()
            resume_bulk()  # an operation whose worker died resumes within a reap period
        if now - self.last_sample > flow_history.SAMPLE_SECONDS / 2:
            self.last_sample = now
            take_sample()
        show_running(steps, now)

    def reap_soon(self) -> None:
        """Reap at the next turn (a timer or lease expiry was due)."""
        self.last_reap = 0.0

    def waits_changed(self) -> None:
        """A commit made steps wait for the outside world: look up the next deadline again."""
        self.wait_due_known = False

    def learn_wait_due(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(NEXT_WAIT_DEADLINE)
            seconds = cursor.fetchone()[0]
        # A deadline due already (a wait the sweep skipped: being completed right now) is
        # looked at again shortly, not at every turn.
        self.wait_due = math.inf if seconds is None else time.monotonic() + max(float(seconds), CLAIM_RETRY)
        self.wait_due_known = True


def take_sample() -> None:
    """This period's in-flight and waiting counts for the charts; a database error loses only
    this sample (logged; the chart shows the period as empty) and the drain goes on."""
    try:
        with connection.cursor() as cursor:
            flow_history.sample(cursor)
    except DatabaseError:
        log.warning("could not sample the destinations' in-flight and waiting counts", exc_info=True)


def fence_off(steps: InFlightSteps, lost: list[tuple[StepFuture, InFlight]]) -> None:
    """Steps whose lease another worker took while they ran here (this process paused,
    or lost its connection, past the lease): their results will be discarded, one not
    started yet does not start, and each step's history says so (S5, like a late result
    discarded at commit)."""
    for future, entry in lost:
        entry.lost = True
        steps.pop(future)
        if entry.gate is not None and entry.holds_slot:
            entry.gate.resize(-1)  # its slot went with its lease
    with transaction.atomic(), connection.cursor() as cursor:
        engine.note_fenced(cursor, [entry.run for _, entry in lost],
                           "discarded the run: this worker's lease was lost while the step ran (fenced)")


def show_running(steps: InFlightSteps, now: float) -> None:
    """Executions whose step has been running a while become RUNNING (a claim does not do
    it: most children's single step finishes within milliseconds, see engine.py)."""
    due = [entry for entry in steps
           if entry.started and not entry.shown_running and now - entry.started > SHOW_RUNNING_AFTER]
    if not due:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        engine.start_executions(cursor, [entry.run for entry in due])
    for entry in due:
        entry.shown_running = True


class Stopping:
    """Whether this drain's cluster stops, looked up every STOP_CHECK_EVERY, and the hand-back
    of its unfinished steps once their grace is over."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.checked_at = 0.0

    def check(self, now: float) -> bool:
        if self.since is None and now - self.checked_at > STOP_CHECK_EVERY:
            self.checked_at = now
            if cluster_stopping():
                log.info("the cluster is stopping: this drain claims nothing more")
                self.since = now
        return self.since is not None

    def shut_down(self, steps: InFlightSteps, now: float) -> bool:
        """While stopping: True once in-flight steps finished, or — after a short grace —
        were released for another worker (their late results are then fenced off)."""
        if not steps:
            return True
        if now - (self.since or now) < SHUTDOWN_GRACE:
            return False
        with transaction.atomic(), connection.cursor() as cursor:
            released = leases.release(cursor, [entry.run.claimed.lease for entry in steps])
            if released:
                notify.work_created(cursor)
        log.info("released %s unfinished steps for other workers", released)
        for entry in steps:
            entry.lost = True  # one still queued for a slot must not start after all
        steps.clear()
        return True


def cluster_stopping() -> bool:
    """Is the qcluster that runs this worker process stopping? django-q2 publishes each
    cluster's status in the shared cache (settings.CACHES) while it runs and stops; a worker
    finds its own cluster by its sentinel's pid (its parent). Outside a cluster: False."""
    from django_q.conf import Conf
    from django_q.status import Stat

    parent = os.getppid()
    try:
        for stat in Stat.get_all():
            if getattr(stat, "sentinel", None) == parent:
                return stat.status in (Conf.STOPPING, Conf.STOPPED)
    except DatabaseError:
        return False
    return False


class Idle:
    """An idle drain's wait for work, on a LISTEN connection of its own."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self.listener: psycopg.Connection[Any] | None = None

    def wait(self, idle_since: float, housekeeping: Housekeeping) -> bool:
        """Wait for work: until a NOTIFY or the next due time (capped so reaping goes on).
        Returns False when the drain should end: idle too long with nothing scheduled."""
        with connection.cursor() as cursor:
            cursor.execute(NEXT_DUE)
            next_due = cursor.fetchone()[0]
        if next_due is None:
            idle_left = self.idle_seconds - (time.monotonic() - idle_since)
            if idle_left <= 0:
                return False
            self.listen(min(idle_left, IDLE_WAKE))
        # Due work we could not claim (its destination is saturated, or another worker
        # holds it) is retried shortly; a future timer or lease expiry is waited for
        # exactly, and the reaper runs right after it.
        elif not self.listen(min(max(float(next_due), CLAIM_RETRY), IDLE_WAKE)):
            housekeeping.reap_soon()
        return True

    def listen(self, timeout: float) -> bool:
        """Wait for a NOTIFY up to ``timeout`` seconds; True if one arrived."""
        if self.listener is None:
            self.listener = psycopg.connect(**connection.get_connection_params(), autocommit=True)
            self.listener.execute(f"LISTEN {notify.CHANNEL}")
        return any(True for _ in self.listener.notifies(timeout=timeout, stop_after=1))

    def close(self) -> None:
        if self.listener is not None:
            try:
                self.listener.close()
            finally:
                self.listener = None


def work_pending() -> bool:
    """Is any step READY (due now or later: a timer) or RUNNING (its worker may die and its
    lease then needs reaping)? Then some drain should be alive."""
    with connection.cursor() as cursor:
        cursor.execute(WORK_PENDING)
        return bool(cursor.fetchone()[0])


def resume_bulk() -> bool:
    """Enqueue the ``bulk`` task if an operation waits for a worker (none leased it, or its
    worker's lease expired): the tick's and live drains' check, one indexed query."""
    try:
        return bulk_operations.orphaned() and kick.request_bulk()
    except DatabaseError:
        log.warning("could not look for bulk operations without a worker")
        return False
