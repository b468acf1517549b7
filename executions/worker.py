"""The worker: django-q2 task functions that drain ready steps in batches.

``drain`` is the only task that runs steps. It takes a drain slot (a session advisory lock,
released by PostgreSQL if the process dies), then loops: claim a batch, run the steps —
HTTP steps and ``async def`` handlers on the drain's event loop (hundreds in flight on one
thread), everything else on a thread pool (handlers are mostly I/O bound); no lock is held
while they run — commit the finished ones in one fenced transaction, renew the leases of the ones still running, time
out the ones past ``timeoutSeconds``, reap expired leases now and then. When idle it waits
on ``LISTEN sb_work`` until new work is announced or the next due time arrives — a due time
in the database, never a fixed sleep — and it exits after ``DRAIN_IDLE_SECONDS`` with
nothing due, or after ``DRAIN_MAX_SECONDS`` (handing over to a fresh task, well inside
django-q2's timeout).

**Roles.** With more than one drain alive, calls to destinations and plain work run in
different processes: the drain of the lowest live slot puts destination steps first and takes
plain steps only while it has no call in flight; every other drain puts plain steps first and,
while it runs ABSTAIN_PLAIN plain steps or more and for ABSTAIN_LINGER after, takes no
destination step. Meanwhile it abstains: its share of each destination's limit goes to the
drains that call (a drain that took a share left to it gives it back as its calls end once
the others call again, SlotGate.share). A call's answer then never waits for an interpreter busy with plain handlers
(the GIL), and neither kind starves, since each has a drain that puts it first. A single plain
step (a spawner between two batches, a timer) hardly slows a drain: for it, a drain goes on
calling — abstaining handed a large limit to one drain, which cannot keep it busy alone (in
`bench destination` at a limit of 256, through every batch of the calls' own spawner). A
drain alone does both. (docs/architecture.md.)

``tick`` runs on a django-q2 schedule (every minute): reap, run a bounded retention pass (the
one ``sb_gc`` runs, S19), expire uploads and worker registrations, start due cron schedules
(executions/services/schedules.py), and make sure a drain runs when work is due. Cluster start-up
(``post_spawn``) starts due schedules and kicks too.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, InvalidStateError
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import psycopg
from django import db
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection, transaction

from executions import kick, registry
from executions.core import calls as call_log
from executions.core import leases, retention, state
from executions.core.outcomes import Outcome, failed
from executions.core.runs import LeaseLost, StepRun
from executions.destinations import outbound
from executions.engine import runner as engine
from executions.platform import logcontext as logs
from executions.platform import metrics, notify, transient
from executions.services import schedules, uploads
from workflows.dsl import ast

log = logging.getLogger(__name__)

# The next moment something becomes due: a READY step's due time, or a RUNNING step's lease
# expiry (its worker may be dead; then the reaper must run). least() skips NULLs.
# The idle drain's and the tick's questions. Each branch matches the predicate of one partial
# index (models.Step: step_claim_free, step_claim_destination, step_running_lease), so they
# read only READY/RUNNING rows however many steps have finished (issue 14 §7).
NEXT_DUE = """
    SELECT extract(epoch FROM least(
        (SELECT min(due_at) FROM executions_step WHERE status = 'READY' AND destination_id IS NULL),
        (SELECT min(due_at) FROM executions_step WHERE status = 'READY' AND destination_id IS NOT NULL),
        (SELECT min(lease_expires_at) FROM executions_step WHERE status = 'RUNNING')) - now())
"""
WORK_PENDING = """
    SELECT EXISTS (SELECT 1 FROM executions_step WHERE status = 'READY' AND destination_id IS NULL)
        OR EXISTS (SELECT 1 FROM executions_step WHERE status = 'READY' AND destination_id IS NOT NULL)
        OR EXISTS (SELECT 1 FROM executions_step WHERE status = 'RUNNING')
"""

# A lost database connection, seen through Django's connection or the drain's own LISTEN
# connection (plain psycopg: an idle drain meets a restart there first).
CONNECTION_LOST = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
DOWN_FOR_GOOD = 300.0  # seconds without the database after which a drain gives up (the tick retries)

REAP_EVERY = 5.0  # seconds between reaper runs inside a live drain
STOP_CHECK_EVERY = 1.0  # seconds between checks that our cluster is stopping
SHUTDOWN_GRACE = 3.0  # seconds in-flight steps get to finish when the cluster stops
SHOW_RUNNING_AFTER = 0.5  # seconds a step runs before its execution is shown RUNNING
IDLE_WAKE = 2.0  # an idle drain looks up at least this often (a stopping cluster, reaping)
CLAIM_RETRY = 0.2  # seconds before claiming again after an empty claim
COMMIT_LINGER = 0.02  # seconds a commit waits for more steps to finish while others run
COMMIT_BATCH = 64  # ... unless this many have finished already
HELP_RETRY = 1.0  # seconds before a drain with a backlog asks again for help that was refused
ROLE_CHECK_EVERY = 0.2  # seconds between looks at which drains are alive (see "Roles" above)
ABSTAIN_LINGER = 1.0  # seconds a drain goes on abstaining after its plain work (a gap in a backlog)
ABSTAIN_PLAIN = 2  # plain steps in flight that make a drain of the plain role abstain (see "Roles")

# The live drains' slots (roles: the lowest one calls destinations first).
LIVE_DRAINS = """
    SELECT objid::int FROM pg_locks
    WHERE locktype = 'advisory' AND classid = %(class)s AND objsubid = 2 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@dataclass
class InFlight:
    run: StepRun
    started: float = 0.0  # monotonic time the handler started (0: still queued)
    deadline: float | None = None
    lost: bool = False  # its lease was taken over: not started yet, it never will
    shown_running: bool = False  # its execution was marked RUNNING while it ran
    on_loop: bool = False  # runs on the drain's event loop (a timed-out one is cancelled)
    holds_slot: bool = True  # its row holds a destination slot (False: claimed into the queue)
    gate: SlotGate | None = None  # its destination's slots in this drain (a destination-bound step)
    admitted: float = 0.0  # monotonic time its gate gave it a slot to run in (0: still queued)

    @property
    def bound(self) -> bool:
        """It calls a destination (S11): it runs in one of its drain's slots there."""
        return self.run.claimed.destination_id is not None


class SlotGate:
    """The slots one drain holds at one destination (S11), and the steps queued for them.

    ``slots`` is how many of the drain's RUNNING steps there hold a slot in the database;
    ``active`` how many calls really run. A queued step starts as soon as ``active < slots``
    (and the drain's leases are known to be valid: a drain whose heartbeat is late starts
    nothing, since its slots may have been reaped). A call that ends starts the next queued
    step at once, on whatever thread it ended on, in the slot its own step still holds until
    the drain commits it; that commit hands the slot to the step that took its place
    (leases.take_over_slots), so the database never counts fewer slots than calls run.
    ``share``: while other drains wait for slots, a call that ends with ``share`` calls or
    more still running starts nothing: its slot is given up at the commit (Drain._hand_over),
    so a drain that took the whole limit hands the surplus back as its calls end.
    Thread-safe: calls end on the event loop or on step threads; the drain's thread claims,
    commits and renews."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots = 0
        self.active = 0
        self.queue: deque[Callable[[], None]] = deque()
        self.valid_until = 0.0  # monotonic time after which nothing starts until a renewal
        self.share: int | None = None  # the slots this drain may use now (None: all it holds)

    def submit(self, start: Callable[[], None], *, holds_slot: bool) -> None:
        """Queue a claimed step's start (a step claimed into a free slot brings the slot)."""
        with self.lock:
            self.slots += holds_slot
            self.queue.append(start)
            ready = self._ready()
        self._run(ready)

    def release(self) -> None:
        """A call ended: its slot goes to the next queued step, if any."""
        with self.lock:
            self.active -= 1
            ready = self._ready()
        self._run(ready)

    def resize(self, delta: int) -> None:
        """Slots taken over (+) or given up (-) in the database."""
        with self.lock:
            self.slots += delta
            ready = self._ready()
        self._run(ready)

    def limit_to(self, share: int | None) -> None:
        with self.lock:
            self.share = share
            ready = self._ready()
        self._run(ready)

    def renewed(self, valid_until: float) -> None:
        with self.lock:
            self.valid_until = max(self.valid_until, valid_until)
            ready = self._ready()
        self._run(ready)

    def _ready(self) -> list[Callable[[], None]]:
        ready: list[Callable[[], None]] = []
        if self.queue and time.monotonic() < self.valid_until:
            room = self.slots if self.share is None else min(self.slots, self.share)
            while self.queue and self.active < room:
                self.active += 1
                ready.append(self.queue.popleft())
        return ready

    @staticmethod
    def _run(ready: list[Callable[[], None]]) -> None:
        for start in ready:
            start()


class StepFuture:
    """The result of one step in flight: ``concurrent.futures.Future``'s protocol (result,
    exception, cancel, done-callbacks; ``InvalidStateError`` when settled twice), on a plain
    lock. The standard future builds a ``threading.Condition`` (with its own re-entrant lock)
    for every step, and takes it for each callback and result: a tenth of a drain thread's
    interpreter time at a limit of 256 (docs/performance.md, "Eighth pass"). Only ``result``
    on a future that has not settled waits, on an event made for that wait alone."""

    __slots__ = ("_callbacks", "_exception", "_lock", "_result", "_state", "_waiter")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[StepFuture], object]] = []
        self._waiter: threading.Event | None = None

    def __repr__(self) -> str:
        return f"<StepFuture {self._state}>"

    def done(self) -> bool:
        return self._state in (_CANCELLED, _FINISHED)

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def running(self) -> bool:
        return self._state == _RUNNING

    def cancel(self) -> bool:
        """Cancel unless running or settled (True if it is cancelled now)."""
        with self._lock:
            if self._state in (_RUNNING, _FINISHED):
                return False
            if self._state == _CANCELLED:
                return True
            self._state = _CANCELLED
        self._settled()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        """For a pool thread about to run the step: False if it was cancelled meanwhile."""
        with self._lock:
            if self._state == _CANCELLED:
                return False
            if self._state != _PENDING:
                raise InvalidStateError(f"{self!r} is not pending")
            self._state = _RUNNING
            return True

    def set_result(self, result: Any) -> None:
        self._settle(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._settle(None, exception)

    def _settle(self, result: Any, exception: BaseException | None) -> None:
        with self._lock:
            if self._state in (_CANCELLED, _FINISHED):
                raise InvalidStateError(f"{self!r} is settled already")
            self._result, self._exception, self._state = result, exception, _FINISHED
        self._settled()

    def _settled(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
            if self._waiter is not None:
                self._waiter.set()
        for callback in callbacks:
            self._call(callback)

    def _call(self, callback: Callable[[StepFuture], object]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("a step future's done-callback %r raised", callback)

    def add_done_callback(self, callback: Callable[[StepFuture], object]) -> None:
        """Call ``callback(self)`` once it settles: now, on this thread, if it has."""
        with self._lock:
            if self._state not in (_CANCELLED, _FINISHED):
                self._callbacks.append(callback)
                return
        self._call(callback)

    def _wait(self, timeout: float | None) -> None:
        with self._lock:
            if self._state in (_CANCELLED, _FINISHED):
                return
            waiter = self._waiter = self._waiter or threading.Event()
        if not waiter.wait(timeout):
            raise TimeoutError(f"{self!r} did not settle within {timeout}s")

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._state == _CANCELLED:
            raise CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        if self._state == _CANCELLED:
            raise CancelledError()
        return self._exception


_PENDING, _RUNNING, _CANCELLED, _FINISHED = "PENDING", "RUNNING", "CANCELLED", "FINISHED"
AnyFuture = Future[Any] | StepFuture  # the step loop settles either (tests hand it plain futures)


def _settle(future: AnyFuture, fn: Callable[[], Any]) -> None:
    """Set ``future`` from ``fn()`` (its result or its exception) unless it was cancelled."""
    try:
        result = fn()
    except BaseException as error:  # handed to whoever waits on the future
        with suppress(InvalidStateError):
            future.set_exception(error)
    else:
        with suppress(InvalidStateError):
            future.set_result(result)


class StepLoop:
    """An asyncio event loop on a daemon thread of its own, for the steps that wait on the
    network (HTTP steps, ``async def`` handlers): one thread keeps hundreds of them in flight.
    Nothing on it touches the database (Django's connections are per thread and blocking):
    steps arrive loaded, their results go back through futures, and the drain's thread
    commits them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._pending: list[tuple[Any, AnyFuture]] = []  # started from other threads, no task yet
        self._pending_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="sb-step-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self, coroutine: Any, future: AnyFuture) -> None:
        """Run ``coroutine`` on the loop, its result or exception settling ``future``; a
        cancelled ``future`` cancels it. Called on the loop's own thread (a call ended and its
        slot's next step starts), the task is created directly — the next turn of the loop.
        From another thread (the drain's, starting the steps it claimed), starts are batched:
        the first of a batch wakes the loop once (``call_soon_threadsafe``) and the loop
        creates every task that arrived meanwhile — not ``run_coroutine_threadsafe`` per
        step, whose wake-up, extra future and chained callbacks cost the loop a tenth of its
        time at a limit of 256 (docs/performance.md, "Seventh pass")."""
        if threading.current_thread() is self.thread:
            self._create(coroutine, future)
            return
        with self._pending_lock:
            self._pending.append((coroutine, future))
            wake = len(self._pending) == 1  # else a wake-up is on its way and takes this one too
        if wake:
            try:
                self.loop.call_soon_threadsafe(self._start_pending)
            except RuntimeError:
                # The loop has closed (the drain is ending): this step never starts. Its caller
                # gets the error, as from run_coroutine_threadsafe, and its lease is reaped.
                with self._pending_lock:
                    self._pending.clear()
                raise

    def _start_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for coroutine, future in pending:
            self._create(coroutine, future)

    def _create(self, coroutine: Any, future: AnyFuture) -> None:
        if future.cancelled():  # cancelled before it started (a shutdown, a timeout)
            coroutine.close()
            return
        task = self.loop.create_task(coroutine)
        task.add_done_callback(lambda done: _settle(future, done.result))

        def cancel() -> None:
            with suppress(RuntimeError):  # the loop has closed: nothing runs any more
                self.loop.call_soon_threadsafe(task.cancel)

        future.add_done_callback(lambda done: cancel() if done.cancelled() else None)

    def shutdown(self) -> None:
        """Cancel what still runs (results after a drain ends are fenced off anyway), close
        the outbound clients, stop the loop."""
        async def close() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await outbound.close_async_clients()

        try:
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=5)
        except Exception:
            log.warning("the step loop did not close cleanly", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class StepPool:
    """A fixed pool of *daemon* threads running steps. Not ThreadPoolExecutor: its threads
    are joined at interpreter exit, so one handler still running after its step timed out
    or was released at shutdown would keep a stopping worker process alive."""

    def __init__(self, threads: int) -> None:
        self.queue: queue.SimpleQueue[tuple[StepFuture, Any, tuple[Any, ...]] | None] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"sb-step-{i}", daemon=True) for i in range(threads)]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Any, *args: Any) -> StepFuture:
        future = StepFuture()
        self.queue.put((future, fn, args))
        return future

    def _work(self) -> None:
        try:
            while (item := self.queue.get()) is not None:
                future, fn, args = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(*args))
                except BaseException as error:
                    future.set_exception(error)
        finally:
            # A step thread's database connection is its own (Django's are per thread):
            # close it with the thread, or every drain would leave its pool's sessions open.
            db.connections.close_all()

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        while cancel_futures:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self.threads:
            self.queue.put(None)


class InlineExecutor:
    """A ThreadPoolExecutor look-alike that runs each call at once on the caller's thread."""

    def submit(self, fn: Any, *args: Any) -> StepFuture:
        future = StepFuture()
        try:
            future.set_result(fn(*args))
        except BaseException as error:
            future.set_exception(error)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


class Drain:
    """One drain: a claim/run/commit loop over a thread pool (see the module doc)."""

    def __init__(self, *, max_seconds: float | None = None, idle_seconds: float | None = None,
                 threads: int | None = None, batch: int | None = None, linger: bool = True,
                 slot: int | None = None) -> None:
        conf = settings.SB
        self.max_seconds = conf["DRAIN_MAX_SECONDS"] if max_seconds is None else max_seconds
        self.idle_seconds = conf["DRAIN_IDLE_SECONDS"] if idle_seconds is None else idle_seconds
        self.batch = int(conf["CLAIM_BATCH"] if batch is None else batch)
        threads = int(conf["STEP_THREADS"] if threads is None else threads)
        # threads=0 runs steps inline on the calling thread (tests, single-step debugging),
        # async ones included (HTTP steps then use the blocking client).
        self.pool: StepPool | InlineExecutor = StepPool(threads) if threads > 0 else InlineExecutor()
        self.step_loop: StepLoop | None = None  # started with the first step that needs it
        self.bound_retry_at = 0.0  # monotonic time before which no destination step is claimed
        self.bound_claimed_at = 0.0  # monotonic time of the last claim that looked for destination steps
        # Destination-bound steps in flight at most, running or queued for one of this
        # drain's slots (SlotGate; a drain with threads claims a queue as deep as its slots).
        self.bound_cap = int(conf["DESTINATION_IN_FLIGHT"]) if threads > 0 else self.batch
        self.queue_ahead = threads > 0
        self.gates: dict[int, SlotGate] = {}  # by destination id
        self.in_flight: dict[StepFuture, InFlight] = {}
        # Every future, as it settles (a done-callback, on whatever thread settles it): a
        # collect takes what finished from here instead of waiting on every future in flight
        # (up to DESTINATION_IN_FLIGHT of them, each with a lock to take, on every turn).
        # Futures no longer in ``in_flight`` (timed out, fenced off, released) are skipped.
        self.finished: queue.SimpleQueue[StepFuture] = queue.SimpleQueue()
        self.listener: psycopg.Connection[Any] | None = None
        self.last_heartbeat = self.last_reap = self.next_claim_at = self.last_stop_check = 0.0
        self.stopping_since: float | None = None
        self.steps_done = 0
        self.helped = False  # a second drain was enqueued at our request
        self.help_retry_at = 0.0  # monotonic time before which we do not ask again
        # linger=False: stop as soon as nothing is claimable now (tests; never waits on timers).
        self.linger = linger
        self.started_at = 0.0
        self.idle_since: float | None = None
        self.trouble_since: float | None = None
        self.troubles = 0
        # Roles (see the module doc): this drain's slot (None: outside one — a test, a
        # command — which does both kinds), its role, and its ABSTAIN_CLASS lock if it holds
        # one (the backend pid that holds it: a reconnect loses session locks).
        self.slot = slot
        self.role = "both"
        self.role_checked_at = -ROLE_CHECK_EVERY
        self.abstaining_on: int | None = None
        self.plain_seen_at = -ABSTAIN_LINGER  # monotonic time plain steps were last in flight here

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> int:
        """Drain until idle or out of time; returns the number of steps finished.

        The drain survives any exception of its own loop: a lost database connection is
        waited out (in-flight steps keep running and their results are committed once it is
        back; see ``_commit``), anything else is logged and the loop goes on. It gives up
        only after ``DOWN_FOR_GOOD`` seconds without the database, leaving its in-flight
        steps to the reaper."""
        self.started_at = time.monotonic()
        self.idle_since = None
        try:
            while True:
                try:
                    if not self._turn():
                        break
                    self.trouble_since, self.troubles = None, 0
                except Exception as error:
                    self._recover(error)
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)
            if self.step_loop is not None:
                self.step_loop.shutdown()
            self._close_listener()
            self._stop_abstaining()
        return self.steps_done

    def _turn(self) -> bool:
        """One turn of the loop; False when the drain should end."""
        now = time.monotonic()
        if self._stopping(now) and self._shut_down(now):
            return False
        out_of_time = now - self.started_at > self.max_seconds or self.stopping_since is not None
        claimed = 0
        if not out_of_time and now >= self.next_claim_at:
            claimed = self._claim_and_submit()
            self.next_claim_at = 0.0 if claimed else now + CLAIM_RETRY
        committed = self._collect(block=not claimed)
        if committed:
            self.next_claim_at = 0.0  # our commit may have made new steps ready
        self._housekeeping()
        if claimed or committed or self.in_flight:
            self.idle_since = None
            return True
        if out_of_time or not self.linger:
            return False
        self.idle_since = self.idle_since or now
        if not self._idle_wait(self.idle_since):
            return False
        self.next_claim_at = 0.0
        return True

    def _recover(self, error: Exception) -> None:
        """After an error in a turn: wait out a lost connection (re-raised once the database
        has been gone for DOWN_FOR_GOOD), log anything else; then pause briefly, so a
        persistent fault cannot spin the loop."""
        now = time.monotonic()
        self.trouble_since = self.trouble_since or now
        pause = min(0.25 * 2 ** min(self.troubles, 5), 5.0)
        self.troubles += 1
        if connection_lost(error) or isinstance(error, psycopg.Error):
            if now - self.trouble_since > DOWN_FOR_GOOD:
                raise error
            metrics.drain_error("connection_lost")
            log.warning("database connection lost in a drain (%s); reconnecting in %.1fs", error, pause)
            connection.close()
            self._close_listener()
        else:
            metrics.drain_error("unexpected")
            log.exception("drain: unexpected %s; the drain goes on (its in-flight steps are kept)",
                          type(error).__name__)
        time.sleep(pause)  # back-off between failing turns; durable waiting is never done this way

    def _stopping(self, now: float) -> bool:
        if self.stopping_since is None and now - self.last_stop_check > STOP_CHECK_EVERY:
            self.last_stop_check = now
            if cluster_stopping():
                log.info("the cluster is stopping: this drain claims nothing more")
                self.stopping_since = now
        return self.stopping_since is not None

    def _shut_down(self, now: float) -> bool:
        """While stopping: True once in-flight steps finished, or — after a short grace —
        were released for another worker (their late results are then fenced off)."""
        if not self.in_flight:
            return True
        if now - (self.stopping_since or now) < SHUTDOWN_GRACE:
            return False
        leases_ = [entry.run.claimed.lease for entry in self.in_flight.values()]
        with transaction.atomic(), connection.cursor() as cursor:
            released = leases.release(cursor, leases_)
            if released:
                notify.work_created(cursor)
        log.info("released %s unfinished steps for other workers", released)
        for entry in self.in_flight.values():
            entry.lost = True  # one still queued for a slot must not start after all
        self.in_flight.clear()
        return True

    def _claim_and_submit(self) -> int:
        """Claim what this drain can run: plain steps up to its batch (they may queue for a
        thread); destination-bound steps into its slots and the queue behind them (S11,
        SlotGate)."""
        bound = sum(entry.bound for entry in self.in_flight.values())
        plain_room = self.batch - (len(self.in_flight) - bound)
        if plain_room < max(1, self.batch // 4):
            plain_room = 0  # claim plain steps in batches, not one by one
        # After a claim that found no destination step claimable, look again only once this
        # drain has freed a slot itself (a commit) or after CLAIM_RETRY: a plain-only load
        # then pays no destination statements on every turn.
        bound_room = max(0, self.bound_cap - bound) if self._bound_claim_due() else 0
        role = self._role()
        if role == "calls" and bound:
            plain_room = 0  # its calls run on: plain steps are for the other drains
        now = time.monotonic()
        if len(self.in_flight) - bound >= ABSTAIN_PLAIN:
            self.plain_seen_at = now
        if role == "plain" and now - self.plain_seen_at < ABSTAIN_LINGER:
            # Its plain steps run on (or ran a moment ago: a gap between two batches of a
            # backlog must not hand the shares back and forth): destinations are for the
            # drain that calls.
            bound_room = 0
            self._abstain()
        else:
            self._stop_abstaining()
        room = plain_room + bound_room
        if room <= 0:
            return 0
        if any(entry.run.claimed.suspect for entry in self.in_flight.values()):
            return 0  # a step that may kill its worker runs alone (leases.py, "Isolation")
        asked_at = time.monotonic()
        promoted: set[int] = set()
        shares: dict[int, int | None] = {}
        with metrics.timed(metrics.CLAIM_SECONDS), transaction.atomic(), connection.cursor() as cursor:
            claimed = leases.claim(cursor, room, alone=not self.in_flight, plain_limit=plain_room,
                                   destination_limit=bound_room, queue=self.queue_ahead, promoted=promoted,
                                   shares=shares)
            runs = engine.load_runs(cursor, claimed)
        if promoted:  # queued steps of ours that took free slots
            self._took_over([e for e in self.in_flight.values() if e.run.step_id in promoted and not e.holds_slot])
        metrics.steps_claimed(runs)
        for run in runs:
            self._start(InFlight(run, holds_slot=run.claimed.holds_slot))
        for destination, share in shares.items():
            if (gate := self.gates.get(destination)) is not None:
                gate.limit_to(share)
        self._renew_gates(asked_at)  # the claim's fresh leases
        if bound_room and not any(run.claimed.destination_id is not None for run in runs):
            self.bound_retry_at = time.monotonic() + CLAIM_RETRY
        if len(runs) > 1 and not self.helped and time.monotonic() >= self.help_retry_at:
            # A backlog: ask for another drain, so idle worker processes join in (each drain's
            # turn is mostly database round trips; two overlap them) — and one is alive to reap
            # if this one stalls. A helper with nothing to do ends when idle. A refused request
            # (every slot taken, or a drain enqueued in the last moment — often this one) is
            # asked again after HELP_RETRY, until one is enqueued.
            self.helped = kick.request_drain()
            self.help_retry_at = time.monotonic() + HELP_RETRY
        return len(runs)

    def _role(self) -> str:
        """``both`` (alone, or outside a drain slot), ``calls`` (the lowest live slot) or
        ``plain`` (see "Roles" in the module doc); looked up every ROLE_CHECK_EVERY."""
        now = time.monotonic()
        if self.slot is not None and now - self.role_checked_at >= ROLE_CHECK_EVERY:
            self.role_checked_at = now
            with connection.cursor() as cursor:
                cursor.execute(LIVE_DRAINS, {"class": kick.ADVISORY_CLASS})
                live = {row[0] for row in cursor.fetchall()} | {self.slot}
            self.role = "both" if len(live) == 1 else "calls" if self.slot == min(live) else "plain"
        return self.role

    def _abstain(self) -> None:
        """Take no destination step for now: the drains that call divide this one's share of
        each limit among them (an ABSTAIN_CLASS lock, counted by leases.DESTINATION_BUDGETS).
        Only a drain in a slot has the role that abstains."""
        if self.abstaining_on is not None and self.abstaining_on == _backend_pid():
            return  # held, on the session that is still ours
        with connection.cursor() as cursor:
            cursor.execute(TRY_SLOT, {"class": kick.ABSTAIN_CLASS, "slot": self.slot})
            self.abstaining_on = _backend_pid() if cursor.fetchone()[0] else None

    def _stop_abstaining(self) -> None:
        if self.abstaining_on is None:
            return
        held_on, self.abstaining_on = self.abstaining_on, None
        if _backend_pid() != held_on:
            return  # the session that held it is gone, and the lock with it
        try:
            with connection.cursor() as cursor:
                cursor.execute(RELEASE_SLOT, {"class": kick.ABSTAIN_CLASS, "slot": self.slot})
        except DatabaseError:
            log.warning("could not stop abstaining (the connection is gone, so is the lock)")

    def _bound_claim_due(self) -> bool:
        """Claim destination steps now? Not while every destination this drain serves has a
        queue of at least one step per slot — it will not run dry before the next turn — but
        still every CLAIM_RETRY, for free slots and other destinations."""
        now = time.monotonic()
        if now < self.bound_retry_at:
            return False
        if self.gates and all(len(gate.queue) >= gate.slots * leases.QUEUE_DEPTH / 2 > 0
                              for gate in self.gates.values()) and now - self.bound_claimed_at < CLAIM_RETRY:
            return False
        self.bound_claimed_at = now
        return True

    def _renew_gates(self, since: float) -> None:
        """Leases renewed (or taken) at monotonic time ``since`` stay valid for two thirds of
        their length (the heartbeat renews at one third): queued steps may start until then."""
        for gate in self.gates.values():
            gate.renewed(since + leases.lease_seconds() * 2 / 3)

    def _start(self, entry: InFlight) -> None:
        """Hand a claimed step to where it runs: the event loop, a thread of its own (a
        destination-bound step that blocks), or the thread pool. A destination-bound step
        goes through its destination's SlotGate: it starts when one of this drain's slots
        there is free."""
        future: StepFuture
        loop = None
        if engine.runs_async(entry.run) and not isinstance(self.pool, InlineExecutor):
            loop = self.step_loop = self.step_loop or StepLoop()
        entry.on_loop = loop is not None
        if isinstance(self.pool, InlineExecutor):
            future = self.pool.submit(self._execute, entry)
        elif (destination := entry.run.claimed.destination_id) is not None:
            entry.gate = self.gates.get(destination) or self.gates.setdefault(destination, SlotGate())
            future = self._start_gated(entry, entry.gate, loop)
        elif loop is not None:
            future = StepFuture()
            loop.start(self._execute_async(entry), future)
        else:
            future = self.pool.submit(self._execute, entry)
        self.in_flight[future] = entry
        future.add_done_callback(self.finished.put)

    def _start_gated(self, entry: InFlight, gate: SlotGate, loop: StepLoop | None) -> StepFuture:
        future = StepFuture()

        if loop is not None:
            async def call() -> Outcome:
                try:
                    return await self._execute_async(entry)
                finally:
                    gate.release()

            def start() -> None:
                entry.admitted = time.monotonic()
                if future.cancelled():  # timed out or shut down while queued
                    gate.release()
                    return
                loop.start(call(), future)
        else:
            def work() -> None:
                try:
                    if not future.cancelled():
                        _settle(future, lambda: self._execute(entry))
                finally:
                    gate.release()
                    db.connections.close_all()  # this thread's own connection goes with it

            def start() -> None:
                entry.admitted = time.monotonic()
                threading.Thread(target=work, name="sb-step-bound", daemon=True).start()

        gate.submit(start, holds_slot=entry.holds_slot)
        return future

    def _execute(self, entry: InFlight) -> Outcome:
        if entry.lost:
            raise LeaseLost(f"step {entry.run.step_id} lost its lease before it started")
        self._started(entry)
        try:
            with logs.step_context(entry.run):
                return engine.execute(entry.run)
        finally:
            if not isinstance(self.pool, InlineExecutor):
                # Vertices that use the database do so on this thread's own connection.
                close_old_connections()

    async def _execute_async(self, entry: InFlight) -> Outcome:
        if entry.lost:
            raise LeaseLost(f"step {entry.run.step_id} lost its lease before it started")
        self._started(entry)
        with logs.step_context(entry.run):  # contextvars: each task on the loop has its own
            return await engine.execute_async(entry.run)

    @staticmethod
    def _started(entry: InFlight) -> None:
        entry.started = time.monotonic()
        vertex = entry.run.vertex
        if isinstance(vertex, ast.WorkVertex):
            entry.deadline = entry.started + vertex.timeout_seconds

    def _collect(self, *, block: bool) -> int:
        """Commit every finished step (one transaction); returns how many were committed."""
        if not self.in_flight:
            return 0
        done = self._finished(until=time.monotonic() + (0.05 if block else 0.0), enough=1)
        if done and len(done) < min(COMMIT_BATCH, len(self.in_flight)) and self.queue_ahead:
            # Others are about to finish: let them join this commit (a commit costs the same
            # round trips for one result or fifty). Slots are not kept idle meanwhile: a
            # queued step runs in the slot of a finished one before its commit (SlotGate).
            done += self._finished(until=time.monotonic() + COMMIT_LINGER, enough=len(self.in_flight) - len(done))
        results: list[tuple[StepRun, Outcome]] = []
        finished: list[InFlight] = []  # leaving this drain: their rows leave RUNNING or are not ours
        for future in done:
            entry = self.in_flight.pop(future)
            finished.append(entry)
            try:
                results.append((entry.run, future.result()))
            except LeaseLost as error:
                log.warning("%s; its result is discarded", error)
        results += self._expire_timeouts(finished)
        if any(run.claimed.destination_id is not None for run, _ in results):
            self.bound_retry_at = 0.0  # a slot of ours frees with this commit: claim again at once
        if results:
            self._commit(results, self._hand_over(finished))
        return len(results)

    def _finished(self, *, until: float, enough: int) -> list[StepFuture]:
        """The futures of ``in_flight`` that have settled: all there are now, waiting until
        monotonic time ``until`` for at least ``enough`` of them."""
        done: list[StepFuture] = []
        seen: set[StepFuture] = set()
        while True:
            try:
                left = until - time.monotonic()
                future = self.finished.get_nowait() if len(done) >= enough or left <= 0 else \
                    self.finished.get(timeout=left)
            except queue.Empty:
                return done
            if future in self.in_flight and future not in seen:
                seen.add(future)
                done.append(future)

    def _hand_over(self, finished: list[InFlight]) -> list[InFlight]:
        """The slots of the destination steps about to be committed: each goes to a queued
        step that already started in it (SlotGate) — the gate keeps counting it, so calls
        that end during the commit start queued steps at once — or is given up now, before
        the commit, so this drain never counts a slot the database no longer does. Returns
        the steps that take a slot over in the commit (leases.take_over_slots; ``_commit``
        takes back from the gate a slot the database refused)."""
        freed: dict[SlotGate, int] = {}
        for entry in finished:
            if entry.gate is not None and entry.holds_slot:
                freed[entry.gate] = freed.get(entry.gate, 0) + 1
        if not freed:
            return []
        takers: list[InFlight] = []
        # In a slot since its gate admitted it (its task may not have begun yet).
        started = sorted((e for e in self.in_flight.values() if e.admitted and not e.holds_slot and e.gate in freed),
                         key=lambda e: e.admitted)
        for gate, count in freed.items():
            taking = [e for e in started if e.gate is gate][:count]
            takers += taking
            if count > len(taking):
                gate.resize(len(taking) - count)
        return takers

    def _expire_timeouts(self, finished: list[InFlight]) -> list[tuple[StepRun, Outcome]]:
        """Fail the steps past their ``timeoutSeconds`` (added to ``finished``)."""
        now = time.monotonic()
        expired = [(future, entry) for future, entry in self.in_flight.items()
                   if entry.deadline is not None and now > entry.deadline]
        results = []
        for future, entry in expired:
            del self.in_flight[future]  # a thread runs on, its late result dropped; the loop's is cancelled
            finished.append(entry)
            if entry.on_loop:
                future.cancel()
            seconds = now - entry.started
            results.append((entry.run, failed(f"timed out after {seconds:.1f}s (timeoutSeconds "
                                              f"{entry.run.vertex.timeout_seconds:g})")))  # type: ignore[attr-defined]
        return results

    def _commit(self, results: list[tuple[StepRun, Outcome]], takers: list[InFlight] | None = None) -> None:
        """Commit finished steps in one transaction. What happens to them on an error:

        * a deadlock or serialization failure: nothing was written; tried again at once;
        * a lost connection: nothing was written; the results are kept and committed once
          the database is back (within their lease), so no attempt is used;
        * any other database error: a result the database refuses (a value it cannot store):
          the batch is split until that result is alone, every other result is committed,
          and its step fails with the reason.
        """
        takers = takers or []
        try:
            taken = self._commit_or_wait(results, [e.run.claimed.lease for e in takers])
        except DatabaseError as error:
            if connection_lost(error):
                raise
            self._commit_apart(results, error)
            taken = self._take_over_apart(takers)
        for entry in takers:
            if entry.run.step_id in taken:
                entry.holds_slot = True
            elif entry.gate is not None:
                entry.gate.resize(-1)  # counted since _hand_over; the database did not grant it
        self.steps_done += len(results)

    def _took_over(self, takers: list[InFlight]) -> None:
        """Queued steps that took free slots (a claim's promotion): their gates gain them."""
        for entry in takers:
            entry.holds_slot = True
            if entry.gate is not None:
                entry.gate.resize(1)

    def _take_over_apart(self, takers: list[InFlight]) -> set[int]:
        """After a commit split apart (a refused result): the slot take-over on its own."""
        if not takers:
            return set()
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                return leases.take_over_slots(cursor, [e.run.claimed.lease for e in takers])
        except DatabaseError:
            log.warning("could not hand %s slots over; their queued steps run on in them", len(takers))
            return set()

    def _commit_or_wait(self, results: list[tuple[StepRun, Outcome]],
                        takers: list[leases.Lease] | None = None) -> set[int]:
        """Commit (see ``_commit``); returns the ids of ``takers`` that took a slot over."""
        give_up_at = time.monotonic() + leases.lease_seconds() / 2
        pause = 0.1
        while True:
            try:
                return transient.retrying(lambda: self._commit_once(results, takers or []))
            except DatabaseError as error:
                if not connection_lost(error) or time.monotonic() > give_up_at:
                    raise
                log.warning("database connection lost committing %s results (%s); retrying in %.1fs",
                            len(results), error, pause)
                connection.close()
                time.sleep(pause)  # reconnection back-off, bounded by the results' leases
                pause = min(pause * 2, 2.0)

    @staticmethod
    def _commit_once(results: list[tuple[StepRun, Outcome]], takers: list[leases.Lease] | None = None) -> set[int]:
        # The call log of steps that ran on the loop (which has no database) goes into the
        # same transaction as their results, and so does the hand-over of their slots to the
        # queued steps that started in them; the fan-out counters come last, so their row —
        # the one every worker's commit of a fan-out's children updates — is locked only from
        # that update to COMMIT (state.fanout_counts_last).
        calls = [row for run, _ in results for row in run.extra.get("calls", ())]
        with metrics.timed(metrics.COMMIT_SECONDS), transaction.atomic(), connection.cursor() as cursor, \
                state.fanout_counts_last(cursor):
            engine.commit(cursor, results)
            call_log.record_calls(calls, cursor=cursor)
            return leases.take_over_slots(cursor, takers or [])

    def _commit_apart(self, results: list[tuple[StepRun, Outcome]], error: DatabaseError) -> None:
        if len(results) == 1:
            run, _ = results[0]
            # Its call log is written on its own (best effort): it may be what was refused.
            call_log.record_calls(run.extra.pop("calls", []))
            metrics.drain_error("result_refused")
            log.error("step %s (%s): its result could not be recorded: %s", run.step_id, run.vertex.id, error)
            refused = failed(f"its result could not be recorded ({type(error).__name__}: {error})"[:2000],
                             retryable=False)
            try:
                self._commit_or_wait([(run, refused)])
            except DatabaseError as again:
                if connection_lost(again):
                    raise
                log.error("step %s: not even its failure could be recorded (%s); its lease will expire",
                          run.step_id, again)
            return
        middle = len(results) // 2
        for half in (results[:middle], results[middle:]):
            try:
                self._commit_or_wait(half)
            except DatabaseError as refused:
                if connection_lost(refused):
                    raise
                self._commit_apart(half, refused)

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if self.in_flight and now - self.last_heartbeat > leases.lease_seconds() / 3:
            self.last_heartbeat = now
            running = [e.run.claimed.lease for e in self.in_flight.values()]
            with connection.cursor() as cursor:
                kept = leases.heartbeat(cursor, running)
            self._renew_gates(now)
            # Not RUNNING with our token any more, yet neither finished here nor moved on by
            # its own vertex (a MERGE or CHAIN commits itself): another worker has it.
            lost = [(future, entry) for future, entry in self.in_flight.items()
                    if entry.run.step_id not in kept and not future.done() and not entry.run.finished_itself]
            if lost:
                self._fence_off(lost)
        # A destination this drain holds nothing at any more: forget its gate (an entry still
        # pointing at it holds no slot there).
        self.gates = {d: g for d, g in self.gates.items() if g.slots > 0 or g.active or g.queue}
        if now - self.last_reap > min(REAP_EVERY, leases.lease_seconds() / 2):
            self.last_reap = now
            engine.reap()
        self._show_running(now)

    def _show_running(self, now: float) -> None:
        """Executions whose step has been running a while become RUNNING (a claim does not do
        it: most children's single step finishes within milliseconds, see engine.py)."""
        due = [entry for entry in self.in_flight.values()
               if entry.started and not entry.shown_running and now - entry.started > SHOW_RUNNING_AFTER]
        if not due:
            return
        with transaction.atomic(), connection.cursor() as cursor:
            engine.start_executions(cursor, [entry.run for entry in due])
        for entry in due:
            entry.shown_running = True

    def _fence_off(self, lost: list[tuple[StepFuture, InFlight]]) -> None:
        """Steps whose lease another worker took while they ran here (this process paused,
        or lost its connection, past the lease): their results will be discarded, one not
        started yet does not start, and each step's history says so (S5, like a late result
        discarded at commit)."""
        for future, entry in lost:
            entry.lost = True
            del self.in_flight[future]
            if entry.gate is not None and entry.holds_slot:
                entry.gate.resize(-1)  # its slot went with its lease
        with transaction.atomic(), connection.cursor() as cursor:
            engine.note_fenced(cursor, [entry.run for _, entry in lost],
                               "discarded the run: this worker's lease was lost while the step ran (fenced)")

    # -- idling -------------------------------------------------------------------------------
    def _idle_wait(self, idle_since: float) -> bool:
        """Wait for work: until a NOTIFY or the next due time (capped so reaping goes on).
        Returns False when the drain should end: idle too long with nothing scheduled."""
        with connection.cursor() as cursor:
            cursor.execute(NEXT_DUE)
            next_due = cursor.fetchone()[0]
        if next_due is None:
            idle_left = self.idle_seconds - (time.monotonic() - idle_since)
            if idle_left <= 0:
                return False
            self._listen(min(idle_left, IDLE_WAKE))
        else:
            # Due work we could not claim (its destination is saturated, or another worker
            # holds it) is retried shortly; a future timer or lease expiry is waited for
            # exactly, and the reaper runs right after it.
            if not self._listen(min(max(float(next_due), CLAIM_RETRY), IDLE_WAKE)):
                self.last_reap = 0.0
        return True

    def _listen(self, timeout: float) -> bool:
        """Wait for a NOTIFY up to ``timeout`` seconds; True if one arrived."""
        if self.listener is None:
            self.listener = psycopg.connect(**connection.get_connection_params(), autocommit=True)
            self.listener.execute(f"LISTEN {notify.CHANNEL}")
        return any(True for _ in self.listener.notifies(timeout=timeout, stop_after=1))

    def _close_listener(self) -> None:
        if self.listener is not None:
            try:
                self.listener.close()
            finally:
                self.listener = None


# --- slots --------------------------------------------------------------------------------------

TRY_SLOT = "SELECT pg_try_advisory_lock(%(class)s, %(slot)s)"
RELEASE_SLOT = "SELECT pg_advisory_unlock(%(class)s, %(slot)s)"


def _backend_pid() -> int | None:
    """The backend of this thread's database session (None: not connected)."""
    return connection.connection.info.backend_pid if connection.connection is not None else None


def _take_slot() -> int | None:
    """Take a free drain slot (one per live worker process, registry.py), or None."""
    with connection.cursor() as cursor:
        for slot in range(registry.drain_slots(cursor)):
            cursor.execute(TRY_SLOT, {"class": kick.ADVISORY_CLASS, "slot": slot})
            if cursor.fetchone()[0]:
                return slot
    return None


def _release_slot(slot: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(RELEASE_SLOT, {"class": kick.ADVISORY_CLASS, "slot": slot})
    except DatabaseError:
        log.warning("could not release drain slot %s (the connection is gone, so is the lock)", slot)


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


def connection_lost(error: BaseException) -> bool:
    """Whether ``error`` is about the connection or the server rather than the data: the
    drain then reconnects and tries again instead of failing anything. Deadlocks and
    serialization failures are retried in place (transient.py); data, integrity and
    programming errors are a result's own fault."""
    return isinstance(error, CONNECTION_LOST) and not transient.is_transient(error)


def work_pending() -> bool:
    """Is any step READY (due now or later: a timer) or RUNNING (its worker may die and its
    lease then needs reaping)? Then some drain should be alive."""
    with connection.cursor() as cursor:
        cursor.execute(WORK_PENDING)
        return bool(cursor.fetchone()[0])


# --- django-q2 task functions -----------------------------------------------------------------

def drain() -> int:
    """Task: drain ready steps while there is work (see the module doc)."""
    close_old_connections()
    _share_the_interpreter()
    _freeze_the_start_up_heap()
    try:
        slot = _take_slot()
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
        _release_slot(slot)
        # Hand over while work or timers remain, and close the race with kicks that found
        # every slot taken just before we left.
        try:
            if work_pending():
                kick.request_drain(force=True)
        except DatabaseError:
            log.warning("could not re-check for due work after the drain")
    return done


_heap_frozen = False


def _share_the_interpreter() -> None:
    """Hand the interpreter lock between threads every ``SB_GIL_SWITCH_SECONDS`` (1 ms; Python's
    default is 5 ms). The event loop's thread wakes for each answer and each call it starts;
    while the drain's thread or a step thread runs Python, it waits up to this long for the
    lock, and at a 50 ms call that wait is idle slot time (docs/performance.md). 0 keeps
    Python's default. Process-wide: worker processes run nothing but drains."""
    seconds = float(settings.SB["GIL_SWITCH_SECONDS"])
    if seconds > 0 and sys.getswitchinterval() != seconds:
        sys.setswitchinterval(seconds)


def _freeze_the_start_up_heap() -> None:
    """Once per worker process, at its first drain: collect, then move every object alive now
    (modules, Django, the app registry: they live as long as the process) out of the
    collector's reach (``gc.freeze``). A full collection then walks only what drains made
    since: 3-12 ms instead of 165-180 ms, during which every thread of the process — the
    event loop's calls included — stood still (measured on a slow two-core machine).

    And collect the young generation every ``SB_GC_YOUNG_THRESHOLD`` allocations (20,000;
    Python's 700): a drain keeps a thousand steps in flight, each a few dozen objects that
    live for a call, and every young collection walked the ones not yet promoted — a tenth of
    a worker's CPU at a limit of 256 (docs/performance.md, "Seventh pass"). What a drain
    makes is freed by reference counting; the collector is only for cycles. 0 keeps Python's."""
    global _heap_frozen
    if not _heap_frozen:
        gc.collect()
        gc.freeze()
        _heap_frozen = True
        young = int(settings.SB["GC_YOUNG_THRESHOLD"])
        if young > 0:
            gc.set_threshold(young, *gc.get_threshold()[1:])


def _drain_resiliently(slot: int) -> int:
    """Run a drain in ``slot``; one that gave up on a database gone for good ends this task
    (a later kick or the tick starts another)."""
    try:
        return Drain(slot=slot).run()
    except CONNECTION_LOST as error:
        log.warning("the database was unavailable for %ss; this drain ends (%s)", DOWN_FOR_GOOD, error)
        connection.close()
        return 0


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
    return {"requeued": requeued, "failed": failed_steps, **gc.as_dict(), "calls_deleted": gc.calls_deleted,
            "uploads_deleted": uploads_deleted,
            "workers_expired": workers_expired, "scheduled": scheduled}


def on_worker_spawn(sender: Any = None, **kwargs: Any) -> None:
    """django-q2 ``post_spawn``: a (re)started worker process registers itself (a heartbeat
    thread keeps it registered: the drain slots follow the live workers), asks for a drain,
    and starts the schedules that came due while the workers were down (not a minute later,
    at the tick)."""
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
