"""Claims, leases, fencing and reaping (S5). Database time only.

* **Claim**: ready, due steps are taken in batches with ``FOR UPDATE SKIP LOCKED`` (SKIP
  LOCKED because a row another claimer holds is simply someone else's work; waiting on it
  would serialise the workers) — plain ones fairly across workspaces, roots and priorities
  (fairness.py). Each claimed step gets a fresh lease token and an expiry
  of ``now() + LEASE_SECONDS``. Steps that call a destination (S11) are claimed per
  destination, only as many as it has free slots: in flight = its RUNNING steps that hold a
  slot (``holds_slot``), so a slot is released by any transition out of RUNNING, lease expiry
  included, and cannot leak. Paused work is not claimed (issue 31, pauses.py).
* **Slots, and the queue behind them**: a drain may also claim, beyond the slots it takes,
  ``QUEUE_DEPTH`` steps per slot *without* a slot (``holds_slot = false``; not for a destination with a
  request rate, whose tokens are spent at claim). They wait in the drain's queue for one of
  its slots; when a call ends, the next queued step starts in its slot at once, without a
  round trip, and the commit that moves the finished step out of RUNNING hands its slot to
  the one that took its place (``take_over_slots``). So the database's count of slots held
  is never below the calls really in flight, and a slot is held only by a step that runs or
  has just finished (executions/worker/gates.py, ``SlotGate``).
* **Fence** (``fence``, the one place the rule is written): a result is committed only where
  the row still carries the worker's token and is RUNNING — those rows are locked first,
  then moved; anything else is a stale worker's late result and is discarded (and noted).
* **Heartbeat**: a worker renews the leases of the steps it is still running.
* **Reap**: expired leases go back to READY with attempt + 1, or FAILED once the step has
  used its attempts ("lease expired N times"), so a step that kills its worker ends.
* **Isolation**: a step on its last attempt that already lost a lease may be what killed its
  worker (a poison pill). It is claimed *alone*, by a drain with nothing else in flight, which
  claims nothing more until it finishes; otherwise it would take its batch down with it.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings

from executions.core import fairness, flow, pauses, payloads, state
from executions.models import StepStatus
from executions.platform import hosts

S = StepStatus

# How many steps a drain queues for a destination per slot it holds (see "Slots" above): a
# drain refills its queue once per turn (a commit and a claim, tens of milliseconds, more on a
# busy machine), so the queue must outlast a turn even when calls are short. The claim counts
# as queued the steps that already run in a finished step's slot until the commit hands it
# over — up to one per slot — so about three per slot really wait. (At 2, the queue ran dry
# before each claim in `bench destination` and slots idled until it came.)
QUEUE_DEPTH = 4

# A step that must be claimed alone (see Isolation above).
SUSPECT = fairness.SUSPECT

# Claims lock their candidates, then move the chosen ones (_choose): a suspect among them is
# taken alone, or not at all by a drain that has work in flight. Plain steps (no destination)
# are chosen fairly across workspaces, roots and priorities (fairness.py).

# Step 1 of a destination claim: lock the destinations that have due work (or steps in this
# worker's queue, which may take a free slot) and are not cooling down nor open (flow.CALLABLE).
# SKIP LOCKED: a destination locked by another claimer is being served by it right now.
# NO KEY UPDATE, not UPDATE: claimers still exclude each other, but a commit checking the
# foreign key of a call-log row or a new step (a KEY SHARE lock on the destination, taken at
# COMMIT) no longer waits for this claim's transaction to end — with FOR UPDATE a drain's
# commit stood still behind the other drain's claim (docs/performance-log.md, "Seventh pass").
LOCK_DESTINATIONS = f"""
    SELECT d.id FROM executions_destination d
    WHERE (EXISTS (SELECT 1 FROM executions_step s
                   WHERE s.destination_id = d.id AND s.status = 'READY' AND s.due_at <= now())
           OR EXISTS (SELECT 1 FROM executions_step s
                      WHERE s.destination_id = d.id AND s.status = 'RUNNING' AND NOT s.holds_slot
                        AND s.leased_by = %(worker)s))
      AND {flow.CALLABLE}
    ORDER BY d.id
    FOR NO KEY UPDATE OF d SKIP LOCKED
"""  # noqa: S608 - constant SQL

# Step 2, a new statement so its snapshot sees every claim committed before our locks:
# free slots per destination = limit - slots held, at most this worker's fair share of the
# limit (limit / the claimers that share it, less the slots it holds already: otherwise the
# claimer that commits first takes every freed slot again and the others, and their database
# connections, stay idle), and the token bucket for the request rate. How many share a limit
# is the caller's to say (``claim``'s ``sharers``: a scalar query, read in this statement's
# snapshot, that the worker builds from its drains, worker/roles.py; "SELECT 1" for a
# caller that shares with no one).
# ``open``: the destination's free slots whatever the share (for PROMOTE_QUEUED).
# ``queue``: how many steps more to claim without a slot (see "Slots" above): enough that
# this worker's queue matches the slots it will hold (at most its share); none for a
# rate-limited destination or an unlimited one (which has no slots to wait for).
# ``share``: the caller's fair share (None: unlimited). A drain holding more — it took the
# whole limit while the other drains abstained — gives the surplus up as its calls end
# (worker.SlotGate), since hand-overs would otherwise keep every slot with it for good.
DESTINATION_BUDGETS = f"""
    WITH sharers AS (SELECT greatest(1, ({{sharers}})) AS n)
    SELECT d.id, free.n AS free,
           d.rate_per_second IS NOT NULL AS rated, mine.queued,
           CASE WHEN NOT %(queue)s OR d.rate_per_second IS NOT NULL OR eff.lim IS NULL
                     OR d.breaker_state <> 'closed' THEN 0
                ELSE greatest(0, least(%(depth)s * least(mine.held + free.n, share.n) - mine.queued,
                                       %(limit)s)) END AS queue,
           greatest(0, eff.lim - used.held) AS open, share.n AS share, d.breaker_state <> 'closed' AS probing
    FROM executions_destination d
    CROSS JOIN LATERAL (SELECT {flow.EFFECTIVE} AS lim) eff
    CROSS JOIN LATERAL (
        SELECT count(*) AS held FROM executions_step r
        WHERE r.destination_id = d.id AND r.status = 'RUNNING' AND r.holds_slot) used
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE r.holds_slot) AS held, count(*) FILTER (WHERE NOT r.holds_slot) AS queued
        FROM executions_step r
        WHERE r.destination_id = d.id AND r.status = 'RUNNING' AND r.leased_by = %(worker)s) mine
    CROSS JOIN LATERAL (
        SELECT ceil(eff.lim::numeric / (SELECT n FROM sharers))::int AS n) share
    CROSS JOIN LATERAL (
        SELECT greatest(0, least(
               -- least() skips NULLs: an unlimited destination falls through to coalesce.
               coalesce(least(eff.lim - used.held, share.n - mine.held),
                        %(limit)s),
               -- CASE, not coalesce: least()/greatest() skip NULLs, so an unset rate would read as 1.
               CASE WHEN d.rate_per_second IS NULL THEN %(limit)s
                    ELSE floor(least(greatest(d.rate_per_second, 1),
                                     d.rate_tokens + d.rate_per_second
                                         * extract(epoch FROM now() - d.rate_updated_at)))::int END,
               %(limit)s)) AS n) free
    WHERE d.id = ANY(%(ids)s)
"""  # noqa: S608 - constant SQL

ALONE = "SELECT 1"  # ``sharers`` of a caller that shares its destinations' limits with no one

@functools.cache
def _budgets_sql(sharers: str) -> str:
    return DESTINATION_BUDGETS.replace("{sharers}", sharers)

# Per destination the first ``free`` candidates (in due order) take a slot, the next
# ``queue`` wait for one; slot holders first under the overall limit.
CLAIM_DESTINATION = f"""
    SELECT s.id, s.suspect, s.rank <= b.free AS holds
    FROM unnest(%(dest_ids)s::bigint[], %(dest_free)s::int[], %(dest_queue)s::int[]) AS b(id, free, queue),
    LATERAL (SELECT c.*, row_number() OVER (ORDER BY c.due_at, c.id) AS rank
             FROM (SELECT id, due_at, {SUSPECT} AS suspect FROM executions_step
                   WHERE destination_id = b.id AND status = 'READY' AND due_at <= now()
                     AND {pauses.CLAIMABLE_STEP}  -- issue 31: not paused (pauses.py)
                   ORDER BY due_at LIMIT b.free + b.queue
                   FOR UPDATE SKIP LOCKED) c) s
    ORDER BY s.rank <= b.free DESC, s.due_at
    LIMIT %(limit)s
"""  # noqa: S608 - constant SQL

# Free slots that no READY step took go to steps already in this worker's queue (the limit
# was raised, or another worker gave slots up after the READY steps ran out): otherwise they
# would wait for this worker's few slots while others sit idle.
PROMOTE_QUEUED = """
    UPDATE executions_step s SET holds_slot = true
    FROM unnest(%(dest_ids)s::bigint[], %(dest_free)s::int[]) AS b(id, free),
    LATERAL (SELECT q.id FROM executions_step q
             WHERE q.destination_id = b.id AND q.status = 'RUNNING' AND NOT q.holds_slot
               AND q.leased_by = %(worker)s
             ORDER BY q.id LIMIT b.free) p
    WHERE s.id = p.id
    RETURNING s.id, s.destination_id
"""

# A drain's queued steps that started in the slots of steps it is committing now take those
# slots over, in the same transaction (fenced: a step no longer ours takes nothing) — but
# never above the destination's limit, which may have been lowered meanwhile: that limit
# then takes effect as calls end. (A take-over never raises the count of slots held, so a
# concurrent claim, which counts the committing steps as holders, cannot overshoot with it.)
# Both CTEs are MATERIALIZED and ``s.id = ANY(...)`` bounds the scan (as in FENCE): inlined,
# the planner re-ran ``room``'s count for every taker and walked every RUNNING step of the
# table against the input list — 60-90 ms per commit at a limit of 256, most of the
# database's time in `bench destination` (docs/performance-log.md, "Fifth pass").
# Each granted row comes with its destination's config_version, read in the same statement: the
# drain's copy of that version may start calls for a while longer (executions/core/calls.py, "Copies").
TAKE_OVER_SLOTS = f"""
    WITH taker AS MATERIALIZED (
        SELECT s.id, s.destination_id,
               row_number() OVER (PARTITION BY s.destination_id ORDER BY l.n) AS n
        FROM executions_step s
        JOIN unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) WITH ORDINALITY AS l(id, token, n) ON s.id = l.id
        WHERE s.id = ANY(%(ids)s) AND s.lease_token = l.token AND s.status = 'RUNNING' AND NOT s.holds_slot
    ), room AS MATERIALIZED (
        SELECT d.id, d.config_version, {flow.EFFECTIVE} - (SELECT count(*) FROM executions_step r
                                                        WHERE r.destination_id = d.id
                                                          AND r.status = 'RUNNING' AND r.holds_slot) AS n,
               {flow.BLOCKED_FOR} AS blocked_for
        FROM executions_destination d WHERE d.id IN (SELECT destination_id FROM taker)
    )
    UPDATE executions_step s SET holds_slot = true
    FROM taker JOIN room ON room.id = taker.destination_id
    WHERE s.id = taker.id AND (room.n IS NULL OR taker.n <= room.n)
    RETURNING s.id, room.id, room.config_version, room.blocked_for
"""  # noqa: S608 - constant SQL

# Spend the tokens of the claimed requests (rows are still locked by this transaction).
SPEND_RATE_TOKENS = """
    UPDATE executions_destination d
    SET rate_tokens = least(greatest(d.rate_per_second, 1),
                            d.rate_tokens + d.rate_per_second * extract(epoch FROM now() - d.rate_updated_at))
                      - c.claimed,
        rate_updated_at = now()
    FROM unnest(%(ids)s::bigint[], %(claimed)s::int[]) AS c(id, claimed)
    WHERE d.id = c.id AND d.rate_per_second IS NOT NULL
"""

# THE fence (S5): of the given (step, token) leases, the rows still leased to their holder —
# RUNNING with the same token — locked in id order for the rest of the caller's transaction,
# so no reaper, cancel or other worker can move them before the caller commits. Every
# commit of a worker's result goes through it; a stale worker's lease matches nothing.
# ``s.id = ANY(...)``: the statistics often say no step is RUNNING (they were taken between
# fan-outs), so the planner drives the join from the RUNNING partial index and compares every
# running step with every lease given; the key condition keeps that scan to the given rows
# (or lets the planner use the primary key): 14-60 ms → ~1 ms with ~800 steps RUNNING.
FENCE = """
    SELECT s.id FROM executions_step s
    JOIN unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS l(id, token) ON s.id = l.id
    WHERE s.id = ANY(%(ids)s) AND s.lease_token = l.token AND s.status = 'RUNNING'
    ORDER BY s.id
    FOR UPDATE OF s
"""

# The fence, renewing the leases it holds (a heartbeat; a vertex's fenced transaction).
RENEW = f"""
    WITH ours AS ({FENCE})
    UPDATE executions_step s SET lease_expires_at = now() + make_interval(secs => %(lease)s)
    FROM ours WHERE s.id = ours.id
    RETURNING s.id
"""  # noqa: S608 - constant SQL

def worker_label() -> str:
    """This process as ``host:pid`` (computed per call: django-q2 forks worker processes);
    the host is ``SB_WORKER_NAME`` when set (hosts.worker_host)."""
    return f"{hosts.worker_host()}:{os.getpid()}"


class Lease(NamedTuple):
    """A step's lease as the fence checks it (a named tuple: built for every step of every commit)."""

    step_id: int
    token: uuid.UUID


@dataclass
class ClaimedStep:
    step_id: int
    execution_id: uuid.UUID
    vertex: str
    prev_vertex: str | None
    attempt: int
    max_attempts: int
    lease_token: uuid.UUID
    state: dict[str, Any]
    destination_id: int | None
    claimed_at: datetime
    lease_expiries: int = 0
    holds_slot: bool = True  # False: claimed into its drain's queue, waiting for a slot
    throttled_waits: int = 0  # throttled answers this round (executions/core/flow.py)

    @property
    def lease(self) -> Lease:
        return Lease(self.step_id, self.lease_token)

    @property
    def suspect(self) -> bool:
        """Its last attempt, after a lost lease: it runs alone (see Isolation above)."""
        return self.lease_expiries > 0 and self.attempt >= self.max_attempts


def lease_seconds() -> float:
    return float(settings.SB["LEASE_SECONDS"])


def _choose(rows: list[tuple[int, bool]], alone: bool) -> tuple[list[int], bool]:
    """Which of the (locked) candidates ``(id, suspect)`` to claim, and whether a suspect among
    them waits for a drain with nothing in flight. Candidates left unclaimed are unlocked at commit."""
    suspects = [step_id for step_id, suspect in rows if suspect]
    if suspects:
        return (suspects[:1] if alone else []), not alone
    return [step_id for step_id, _ in rows], False


def _claim(cursor: Any, step_ids: list[int], queued: list[int] | None = None) -> list[ClaimedStep]:
    """Claim the steps; those in ``queued`` without a slot (see "Slots" above)."""
    if not step_ids:
        return []
    moved = state.claim_steps(cursor, step_ids, lease_seconds=lease_seconds(), worker=worker_label(),
                              queued=queued or [])
    order = {step_id: position for position, step_id in enumerate(step_ids)}
    moved.sort(key=lambda row: order[row["id"]])  # the candidates' order: slot holders, then oldest due first
    return [
        ClaimedStep(
            step_id=row["id"], execution_id=row["execution_id"], vertex=row["vertex"],
            prev_vertex=row["prev_vertex"], attempt=row["attempt"], max_attempts=row["max_attempts"],
            lease_token=row["lease_token"], state=_state(row["state"]),
            destination_id=row["destination_id"],
            claimed_at=row["claimed_at"], lease_expiries=row["lease_expiries"], holds_slot=row["holds_slot"],
            throttled_waits=row["throttled_waits"],
        )
        for row in moved
    ]


def _state(value: Any) -> dict[str, Any]:
    """A claimed step's state; most steps have none (``{}``), which needs no JSON parser."""
    return {} if value == "{}" else payloads.decode(value) or {}


def claim(cursor: Any, limit: int, *, alone: bool = True, destination_limit: int | None = None,
          plain_limit: int | None = None, queue: bool = False,
          promoted: set[int] | None = None, shares: dict[int, int | None] | None = None,
          sharers: str = ALONE) -> list[ClaimedStep]:
    """Claim up to ``limit`` due steps (call inside a transaction): at most ``plain_limit``
    steps that call no destination and at most ``destination_limit`` that do (both default to
    ``limit``). A destination step claimed into a free slot holds it (S11); with ``queue``
    (a drain that starts queued steps as its calls end, worker.SlotGate) more are claimed
    without a slot, to wait for one (see "Slots" above), and free slots no READY step took go
    to the caller's queued steps: their ids are added to ``promoted``. ``shares`` receives,
    per destination looked at, how many slots the caller may hold (None: no limit for it now,
    because the destination is unlimited or no READY step waits for a slot). ``sharers``: SQL
    of a scalar query, how many claimers share each destination's limit (see
    DESTINATION_BUDGETS; the worker's drains pass worker/roles.SHARERS).

    Fairness: when both kinds are due, neither starves the other. Plain steps get the first
    half of the room (at least one), destination steps the rest (their slots bound them
    anyway), and plain steps whatever room the destination ones left.

    Their executions are not touched here: the engine marks an execution RUNNING once it
    visibly runs (engine.py, ``start_executions``). ``alone``: the caller has nothing in
    flight, so it may take a suspect — which then comes by itself (see Isolation above)."""
    if limit <= 0:
        return []
    cursor.execute(pauses.CLAIM_BARRIER)  # issue 31: a pause that returned is seen (pauses.py)
    bound_room = min(limit, limit if destination_limit is None else max(destination_limit, 0))
    plain_room = min(limit, limit if plain_limit is None else max(plain_limit, 0))
    claimed: list[ClaimedStep] = []
    bound = 0
    more_bound = True  # False once a destination pass took less than its room: nothing more is free
    more_plain = True  # likewise for plain steps: nothing more is due
    # Plain steps are looked at first (their half of the room), so a suspect among them stops
    # a busy drain before it takes anything (see Isolation above); then destination steps,
    # then plain steps again with what is left.
    passes = (("plain", min(plain_room, max(1, limit // 2))), ("bound", bound_room), ("plain", plain_room))
    for kind, room in passes:
        room = min(room - (bound if kind == "bound" else len(claimed) - bound), limit - len(claimed))
        if room <= 0 or not (more_bound if kind == "bound" else more_plain):
            continue
        if kind == "plain":
            step_ids, waiting = _choose(fairness.claim_plain(cursor, room), alone and not claimed)
            taken = _claim(cursor, step_ids)
            more_plain = len(step_ids) == room
        else:
            taken, waiting = _claim_destinations(cursor, room, alone=alone and not claimed, queue=queue,
                                                 promoted=promoted, shares=shares, sharers=sharers)
            bound += len(taken)
            more_bound = len(taken) == room
        claimed += taken
        if waiting or any(c.suspect for c in taken):
            break  # a suspect runs alone (see Isolation above)
    return claimed


class Budget(NamedTuple):
    """A row of DESTINATION_BUDGETS."""

    id: int
    free: int  # slots this worker may take now (its share, the rate)
    rated: bool  # the destination has a request rate
    queued: int  # this worker's steps there waiting for a slot
    queue: int  # steps more to claim into its queue
    open: int | None  # the destination's free slots, whatever the share (None: unlimited)
    share: int | None  # the slots this worker may hold while READY steps wait (None: unlimited)
    probing: bool = False  # its breaker is not closed: the one slot is a probe (flow.mark_probes)


def _claim_destinations(cursor: Any, limit: int, *, alone: bool, queue: bool, promoted: set[int] | None,
                        shares: dict[int, int | None] | None, sharers: str) -> tuple[list[ClaimedStep], bool]:
    """Up to ``limit`` destination steps within their destinations' free slots and rate
    tokens (and with ``queue``, more to wait for a slot; free slots left over go to steps in
    the caller's queue, added to ``promoted``); and whether a suspect among the candidates
    waits for a drain with nothing in flight."""
    worker = worker_label()
    cursor.execute(LOCK_DESTINATIONS, {"worker": worker})
    locked = [row[0] for row in cursor.fetchall()]
    if not locked:
        return [], False
    cursor.execute(_budgets_sql(sharers), {"ids": locked, "limit": limit, "worker": worker, "queue": queue,
                                           "depth": QUEUE_DEPTH})
    every = [Budget(*row) for row in cursor.fetchall()]
    budgets = [b for b in every if b.free + b.queue > 0]
    if not budgets:
        return [], False
    rated = {b.id for b in budgets if b.rated}
    cursor.execute(CLAIM_DESTINATION, {"dest_ids": [b.id for b in budgets], "dest_free": [b.free for b in budgets],
                                       "dest_queue": [b.queue for b in budgets], "limit": limit})
    rows = cursor.fetchall()
    suspects = [step_id for step_id, suspect, _ in rows if suspect]
    if suspects:  # a suspect runs alone, in a slot of its own (see Isolation above)
        step_ids, queued, waiting = (suspects[:1] if alone else []), [], not alone
    else:
        step_ids, waiting = [step_id for step_id, _, _ in rows], False
        queued = [step_id for step_id, _, holds in rows if not holds]
    claimed = _claim(cursor, step_ids, queued)
    found = Counter(step.destination_id for step in claimed if step.destination_id is not None)
    if probing := {b.id for b in budgets if b.probing}:
        flow.mark_probes(cursor, {c.destination_id: c.step_id for c in claimed if c.destination_id in probing})
    # A destination whose candidates fell short of its budget has no READY step left (unless
    # the overall limit cut the candidates short).
    exhausted = set() if len(rows) >= limit else {b.id for b in every if found[b.id] < b.free + b.queue}
    _promote(cursor, every, claimed, worker, promoted, exhausted=exhausted)
    if shares is not None:
        shares.update((b.id, None if b.id in exhausted else b.share) for b in every)
    counts = {destination: n for destination, n in found.items() if destination in rated}
    if counts:
        cursor.execute(SPEND_RATE_TOKENS, {"ids": list(counts), "claimed": list(counts.values())})
    return claimed, waiting


def _promote(cursor: Any, budgets: list[Budget], claimed: list[ClaimedStep], worker: str,
             promoted: set[int] | None, *, exhausted: set[int]) -> None:
    """Free slots that no READY step took go to steps in the caller's queue (PROMOTE_QUEUED).
    While READY steps still wait at a destination, only up to the caller's share: the other
    drains claim the rest for them (otherwise the first drain to claim after a start takes
    every slot of the limit and keeps it, slot by slot, by handing them over). Once none is
    left (``exhausted``: the claim found fewer than its budget), up to the limit: steps
    already queued here can run nowhere else, and a drain with nothing to claim (it stays
    alive while others' leases run) would otherwise hold the rest idle."""
    taken = Counter(step.destination_id for step in claimed if step.holds_slot and step.destination_id is not None)
    left = []
    for b in budgets:
        room = (b.open or 0) if b.id in exhausted else min(b.free, b.open or 0)
        if (n := min(room - taken[b.id], b.queued)) > 0:
            left.append((b.id, n))
    if not left:
        return
    cursor.execute(PROMOTE_QUEUED, {"dest_ids": [d for d, _ in left], "dest_free": [n for _, n in left],
                                    "worker": worker})
    if promoted is not None:
        promoted.update(row[0] for row in cursor.fetchall())


def _lease_params(leases_: list[Lease]) -> dict[str, Any]:
    return {"ids": [lease.step_id for lease in leases_], "tokens": [lease.token for lease in leases_]}


def take_over_slots(cursor: Any, leases_: list[Lease], versions: dict[int, int] | None = None,
                    blocked: dict[int, float] | None = None) -> set[int]:
    """Queued steps that started in the slots of the steps being committed in this transaction
    take those slots (see "Slots" above); returns the ids that did. ``versions`` receives the
    config_version of each destination where one did, ``blocked`` flow.BLOCKED_FOR there (0: none)."""
    if not leases_:
        return set()
    cursor.execute(TAKE_OVER_SLOTS, _lease_params(leases_))
    rows = cursor.fetchall()
    if versions is not None:
        versions.update((destination, version) for _, destination, version, _ in rows)
    if blocked is not None:
        blocked.update((d, max(seconds, blocked.get(d, 0.0))) for _, d, _, seconds in rows)
    return {row[0] for row in rows}


def fence(cursor: Any, leases_: list[Lease]) -> set[int]:
    """Lock the steps still leased to their holder (FENCE), in the transaction that commits
    their results; returns their ids (the others' results are stale)."""
    if not leases_:
        return set()
    cursor.execute(FENCE, _lease_params(leases_))
    return {row[0] for row in cursor.fetchall()}


def heartbeat(cursor: Any, leases_: list[Lease]) -> set[int]:
    """Renew leases (and hold them fenced for the rest of the transaction); returns the step
    ids whose lease is still ours."""
    if not leases_:
        return set()
    cursor.execute(RENEW, {**_lease_params(leases_), "lease": lease_seconds()})
    return {row[0] for row in cursor.fetchall()}


def release(cursor: Any, leases_: list[Lease]) -> int:
    """Hand steps back (RUNNING → READY, no attempt consumed) when their worker shuts down, so
    another takes them now, not after the lease expires; fenced (a lost lease is left alone)."""
    ours = fence(cursor, leases_)
    if not ours:
        return 0
    return state.release_steps(cursor, sorted(ours), message="released: its worker is shutting down")


def reap(cursor: Any, limit: int = 1000) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return expired leases to READY (attempt + 1) or fail steps out of attempts: ``(requeued,
    failed)``; the caller fails the executions of ``failed`` steps in the same transaction."""
    return state.requeue_expired(cursor, limit), state.fail_expired(cursor, limit)
