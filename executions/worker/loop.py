"""The drain loop: claim a batch, run it, commit what finished, look after the rest.

A drain (``Drain.run``) loops: it decides what to claim (policy.decide) and claims it in one
statement (leases.claim); the steps run on the event loop or the thread pool (runners.py), a
destination-bound one in one of the drain's slots there (gates.py), with no lock held while
they run; the drain commits the finished ones in one fenced transaction (commits.py), and
between turns renews the leases of the ones still running, times out the ones past
``timeoutSeconds`` and reaps expired leases now and then (housekeeping.py). When idle it
waits on ``LISTEN sb_work`` until new work is announced or the next due time arrives — a due
time in the database, never a fixed sleep — and it ends after ``DRAIN_IDLE_SECONDS`` with
nothing due, or after ``DRAIN_MAX_SECONDS`` (tasks.drain hands over to a fresh task, well
inside django-q2's timeout).
"""

from __future__ import annotations

import logging
import time

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from executions import kick
from executions.core import leases
from executions.core.outcomes import Outcome
from executions.core.runs import LeaseLost, StepRun
from executions.engine import runner as engine
from executions.platform import metrics
from executions.worker import commits, copies, handover, policy, roles
from executions.worker.gates import Gates
from executions.worker.housekeeping import Housekeeping, Idle, Stopping
from executions.worker.inflight import InFlight, InFlightSteps
from executions.worker.runners import Runners

log = logging.getLogger(__name__)

DOWN_FOR_GOOD = 300.0  # seconds without the database after which a drain gives up (the tick retries)
COMMIT_LINGER = 0.02  # seconds a commit waits for more steps to finish while others run
COMMIT_BATCH = 64  # ... unless this many have finished already
HELP_RETRY = 1.0  # seconds before a drain with a backlog asks again for help that was refused


class Drain:
    """One drain: a claim/run/commit loop (see the module doc). ``slot``: the drain slot it
    runs in (tasks.drain; None outside one — a test, a command — does both kinds of work);
    ``linger=False``: stop as soon as nothing is claimable now (tests; never waits on timers);
    ``threads=0``: run steps inline on the calling thread."""

    def __init__(self, *, max_seconds: float | None = None, idle_seconds: float | None = None,
                 threads: int | None = None, batch: int | None = None, linger: bool = True,
                 slot: int | None = None) -> None:
        conf = settings.SB
        self.max_seconds = conf["DRAIN_MAX_SECONDS"] if max_seconds is None else max_seconds
        self.batch = int(conf["CLAIM_BATCH"] if batch is None else batch)
        threads = int(conf["STEP_THREADS"] if threads is None else threads)
        self.runners = Runners(threads)
        # Destination-bound steps in flight at most, running or queued for one of this
        # drain's slots (a drain with threads claims a queue as deep as its slots).
        self.bound_cap = int(conf["DESTINATION_IN_FLIGHT"]) if threads > 0 else self.batch
        self.queue_ahead = threads > 0
        self.gates = Gates()
        self.copies: dict[int, copies.Copy] = {}  # an inline drain's (a drain with threads keeps them in its gates)
        self.in_flight = InFlightSteps()
        self.roles = roles.Roles(slot)
        self.housekeeping = Housekeeping()
        self.stopping = Stopping()
        self.idle = Idle(conf["DRAIN_IDLE_SECONDS"] if idle_seconds is None else idle_seconds)
        self.linger = linger
        self.steps_done = 0
        self.next_claim_at = self.started_at = 0.0
        self.idle_since: float | None = None
        self.trouble_since: float | None = None
        self.troubles = 0
        self.helped = False  # a second drain was enqueued at our request
        self.help_retry_at = 0.0  # monotonic time before which we do not ask again
        # What policy.decide keeps from one claim to the next.
        self.plain_seen_at = -policy.ABSTAIN_LINGER
        self.bound_retry_at = self.bound_claimed_at = 0.0

    def run(self) -> int:
        """Drain until idle or out of time; returns the number of steps finished.

        The drain survives any exception of its own loop: a lost database connection is
        waited out (in-flight steps keep running and their results are committed once it is
        back; commits.py), anything else is logged and the loop goes on. It gives up only
        after ``DOWN_FOR_GOOD`` seconds without the database, leaving its in-flight steps to
        the reaper."""
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
            self.runners.shutdown()
            self.idle.close()
            self.roles.stop_abstaining()
        return self.steps_done

    def _turn(self) -> bool:
        """One turn of the loop; False when the drain should end."""
        now = time.monotonic()
        if self.stopping.check(now) and self.stopping.shut_down(self.in_flight, now):
            return False
        out_of_time = now - self.started_at > self.max_seconds or self.stopping.since is not None
        claimed = 0
        if not out_of_time and now >= self.next_claim_at:
            claimed = self._claim()
            self.next_claim_at = 0.0 if claimed else now + policy.CLAIM_RETRY
        committed = self._collect(block=not claimed)
        if committed:
            self.next_claim_at = 0.0  # our commit may have made new steps ready
        self.housekeeping.run(self.in_flight, self.gates)
        if claimed or committed or self.in_flight:
            self.idle_since = None
            return True
        if out_of_time or not self.linger:
            return False
        self.idle_since = self.idle_since or now
        if not self.idle.wait(self.idle_since, self.housekeeping):
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
        if commits.connection_lost(error) or isinstance(error, psycopg.Error):
            if now - self.trouble_since > DOWN_FOR_GOOD:
                raise error
            metrics.drain_error("connection_lost")
            log.warning("database connection lost in a drain (%s); reconnecting in %.1fs", error, pause)
            connection.close()
            self.idle.close()
        else:
            metrics.drain_error("unexpected")
            log.exception("drain: unexpected %s; the drain goes on (its in-flight steps are kept)",
                          type(error).__name__)
        time.sleep(pause)  # back-off between failing turns; durable waiting is never done this way

    def _decide(self) -> policy.Claim:
        bound = self.in_flight.bound()
        claim = policy.decide(policy.DrainView(
            now=time.monotonic(), batch=self.batch, bound_cap=self.bound_cap,
            plain_in_flight=len(self.in_flight) - bound, bound_in_flight=bound, role=self.roles.current(),
            suspect=self.in_flight.suspect(), plain_seen_at=self.plain_seen_at,
            bound_retry_at=self.bound_retry_at, bound_claimed_at=self.bound_claimed_at,
            queues=self.gates.queues(), queue_depth=leases.QUEUE_DEPTH))
        self.plain_seen_at, self.bound_claimed_at = claim.plain_seen_at, claim.bound_claimed_at
        self.roles.abstain(claim.abstain)
        return claim

    def _claim(self) -> int:
        """Claim what policy.decide says (plain steps may queue for a thread; destination-bound
        ones fill this drain's slots and the queue behind them) and start it."""
        claim = self._decide()
        if claim.room <= 0:
            return 0
        asked_at = time.monotonic()
        promoted: set[int] = set()
        shares: dict[int, int | None] = {}
        with metrics.timed(metrics.CLAIM_SECONDS), transaction.atomic(), connection.cursor() as cursor:
            claimed = leases.claim(cursor, claim.room, alone=not self.in_flight, plain_limit=claim.plain,
                                   destination_limit=claim.bound, queue=self.queue_ahead, promoted=promoted,
                                   shares=shares, sharers=roles.SHARERS)
            runs = engine.load_runs(cursor, claimed)
        # The destinations' settings as this claim read them: the copies its steps start with.
        claimed_copies = {run.claimed.destination_id: copies.of_claim(run.destination, asked_at) for run in runs
                          if run.claimed.destination_id is not None and run.destination is not None}
        if self.runners.inline:
            self.copies.update(claimed_copies)
        else:
            self.gates.configure(claimed_copies)
        if promoted:  # queued steps of ours that took free slots
            handover.promoted([e for e in self.in_flight if e.run.step_id in promoted and not e.holds_slot])
        metrics.steps_claimed(runs)
        for run in runs:
            self._start(InFlight(run, holds_slot=run.claimed.holds_slot))
        self.gates.limit_to(shares)
        self.gates.renewed(asked_at)  # the claim's fresh leases
        if claim.bound and not any(run.claimed.destination_id is not None for run in runs):
            self.bound_retry_at = time.monotonic() + policy.CLAIM_RETRY
        if len(runs) > 1 and not self.helped and time.monotonic() >= self.help_retry_at:
            # A backlog: ask for another drain, so idle worker processes join in (each drain's
            # turn is mostly database round trips; two overlap them) — and one is alive to reap
            # if this one stalls. A helper with nothing to do ends when idle. A refused request
            # (every slot taken, or a drain enqueued in the last moment — often this one) is
            # asked again after HELP_RETRY, until one is enqueued.
            self.helped = kick.request_drain()
            self.help_retry_at = time.monotonic() + HELP_RETRY
        return len(runs)

    def _start(self, entry: InFlight) -> None:
        destination = entry.run.claimed.destination_id
        gate = self.gates.of(destination) if destination is not None and not self.runners.inline else None
        if destination is not None and self.runners.inline:
            # Run at once, after the steps claimed before it: with a fresh copy (copies.py).
            entry.run.destination = self._inline_copy(destination).values
        self.in_flight.add(self.runners.start(entry, gate), entry)

    def _inline_copy(self, destination: int) -> copies.Copy:
        copy = self.copies.get(destination)
        if copy is None or not copy.fresh(time.monotonic()):
            self.copies.update(copies.read([destination]))
            copy = self.copies[destination]
        return copy

    def _read_copies(self) -> None:
        """Read again the lapsed copies that queued steps wait for (a destination this drain
        has not claimed for, nor committed a hand-over at, in COPY_SECONDS), so they start
        now and the coming commit hands them the slots of the calls that ended. A database
        error leaves them waiting (the commit that follows meets it too)."""
        self.gates.resume()
        waiting = self.gates.waiting_for_copies()
        if not waiting:
            return
        try:
            self.gates.configure(copies.read(waiting))
        except DatabaseError as error:
            log.warning("could not read the settings of destinations %s (%s); their queued steps wait",
                        waiting, error)

    def _collect(self, *, block: bool) -> int:
        """Commit every finished step (one transaction); returns how many were committed."""
        if not self.in_flight:
            return 0
        done = self.in_flight.settled(until=time.monotonic() + (0.05 if block else 0.0), enough=1)
        self._read_copies()
        if done and len(done) < min(COMMIT_BATCH, len(self.in_flight)) and self.queue_ahead:
            # Others are about to finish: let them join this commit (a commit costs the same
            # round trips for one result or fifty). Slots are not kept idle meanwhile: a
            # queued step runs in the slot of a finished one before its commit (SlotGate).
            done += self.in_flight.settled(until=time.monotonic() + COMMIT_LINGER,
                                           enough=len(self.in_flight) - len(done))
        results: list[tuple[StepRun, Outcome]] = []
        finished: list[InFlight] = []  # leaving this drain: their rows leave RUNNING or are not ours
        for future in done:
            entry = self.in_flight.pop(future)
            finished.append(entry)
            try:
                results.append((entry.run, future.result()))
            except LeaseLost as error:
                log.warning("%s; its result is discarded", error)
        results += self.in_flight.expire_timeouts(finished)
        if any(run.claimed.destination_id is not None for run, _ in results):
            self.bound_retry_at = 0.0  # a slot of ours frees with this commit: claim again at once
        if results:
            self._read_copies()  # again: a copy may have lapsed while the commit lingered
            takers = handover.hand_over(finished, self.in_flight)
            asked_at = time.monotonic()
            versions: dict[int, int] = {}
            blocked: dict[int, float] = {}
            handover.taken_over(takers, commits.commit(results, [e.run.claimed.lease for e in takers], versions,
                                                       blocked))
            self.gates.confirm(versions, asked_at)  # the take-over read each destination's config version
            self.gates.pause(blocked, asked_at)  # cooldowns and open breakers the commit found
            self.steps_done += len(results)
            if any(outcome.kind == "await" or getattr(run.vertex, "wait_for_callback", None) is not None
                   for run, outcome in results):
                self.housekeeping.waits_changed()  # steps began to wait: a new deadline, maybe the next
        return len(results)
