"""The one owner of Execution and Step status changes.

Every status write is a guarded, set-based statement built here::

    WITH src AS (SELECT … FROM <table> JOIN (<rows>) … WHERE status = ANY(<allowed from>)
                 ORDER BY id FOR UPDATE),
         moved AS (UPDATE <table> SET status = <to>, … FROM src … RETURNING …),
         ev AS (INSERT INTO executions_event … SELECT … FROM moved)
    SELECT … FROM moved

so a transition not in the tables below cannot happen, rows are locked in id order, and
each transition appends its event in the same statement. Callers name a transition (the
functions under "Named transitions" below: ``claim_steps``, ``fail_steps``,
``cancel_executions``, …) and pass the rows and per-row values; every SQL fragment of a
transition — what it sets, which rows it selects — is written here, nowhere else. This
module also keeps the derived bookkeeping consistent:

* children entering or leaving a terminal status move their fan-out's counts, in the same
  transaction (so a MERGE decides in O(1));
* a fan-out that becomes decided wakes its WAITING merge step;
* a fan-out with maxConcurrency releases a held child for each running child that finishes;
* a failed child that is retried re-opens a merge that had failed on it, and its parent
  execution (redrive, S9) — recursively up the tree.

Fencing is not done here: a caller that commits a worker's result first locks the rows
still leased to it (``leases.fence``) and passes only those.

Lock order (all writers follow it; see docs/architecture.md): a step before its execution,
a child's rows before its parent's fan-out, the fan-out before the parent's steps, the
parent's steps before the parent execution; rows of one kind in id order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from executions.core import payloads, records
from executions.core.merge_rule import FANOUT_DECIDED, merge_counts
from executions.models import CancelCause, ExecutionStatus, StepStatus
from executions.platform import metrics, notify

E, S = ExecutionStatus, StepStatus

STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    S.READY: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.READY, S.WAITING, S.CANCELLED}),
    S.WAITING: frozenset({S.READY, S.CANCELLED}),
    S.FAILED: frozenset({S.READY, S.WAITING}),  # operator retry; merge re-opened by redrive
    # S28, only through rerun_cancelled_steps / reopen_stopped_spawners: a step the failFast
    # policy cancelled is re-run; a spawner that failFast stopped early spawns the rest.
    S.SUCCEEDED: frozenset({S.READY}),
    S.CANCELLED: frozenset({S.READY}),
}

EXECUTION_TRANSITIONS: dict[str, frozenset[str]] = {
    # PENDING → SUCCEEDED/FAILED: its only step finished before it was seen running (engine.py).
    E.PENDING: frozenset({E.RUNNING, E.SUCCEEDED, E.FAILED, E.CANCELLED}),
    E.RUNNING: frozenset({E.SUCCEEDED, E.FAILED, E.CANCELLED}),
    E.FAILED: frozenset({E.PENDING, E.RUNNING}),  # operator retry; redrive of a parent
    E.SUCCEEDED: frozenset(),
    E.CANCELLED: frozenset({E.PENDING}),  # S28: only a child the failFast policy cancelled (rerun_cancelled_executions)
}


def allowed_from(table: dict[str, frozenset[str]], to: str) -> list[str]:
    sources = sorted(status for status, targets in table.items() if to in targets)
    if not sources:
        raise ValueError(f"no transition leads to {to}")
    return sources


@dataclass(frozen=True)
class _Source:
    """Which rows to move: SQL yielding ``id`` plus the named per-row ``columns``; params
    are named (``%(name)s``)."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()


def _ids(values: Iterable[Any], cast: str = "bigint") -> _Source:
    return _Source(f"SELECT unnest(%(src_ids)s::{cast}[]) AS id", {"src_ids": list(values)})


def _rows(columns: dict[str, tuple[str, Sequence[Any]]], cast: str = "bigint", *, id_values: Sequence[Any]) -> _Source:
    """Per-row values: ``{"error": ("text", [...]), …}`` aligned with ``id_values``."""
    selects = [f"unnest(%(src_ids)s::{cast}[]) AS id"]
    params: dict[str, Any] = {"src_ids": list(id_values)}
    for name, (sql_type, values) in columns.items():
        selects.append(f"unnest(%(src_{name})s::{sql_type}[]) AS {name}")
        params[f"src_{name}"] = list(values)
    return _Source(f"SELECT {', '.join(selects)}", params, tuple(columns))


# --- the guarded statement -------------------------------------------------------------------

_STEP_AUTO = {
    S.RUNNING: {"started_at": "coalesce(s.started_at, now())", "attempt_started_at": "now()"},
    S.READY: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "NULL"},
    S.WAITING: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "NULL"},
    S.SUCCEEDED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
    S.FAILED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
    S.CANCELLED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
}
# A new round (an operator's retry → PENDING, a redrive FAILED → RUNNING) restarts the
# round's clock, ``attempt_started_at``; the first start (``started_at``) stays.
_EXECUTION_AUTO = {
    E.PENDING: {"finished_at": "NULL", "attempt_started_at": "NULL"},
    E.RUNNING: {"started_at": "coalesce(s.started_at, now())", "attempt_started_at": "now()", "finished_at": "NULL"},
    E.SUCCEEDED: {"finished_at": "now()"},
    E.FAILED: {"finished_at": "now()"},
    E.CANCELLED: {"finished_at": "now()"},
}


def _statement(*, table: str, kind: str, to: str, sources: list[str], source: _Source, sets: dict[str, str],
               skip_locked: bool, returning: Sequence[str], message: str | None,
               select: Sequence[str] = ()) -> tuple[str, dict]:
    is_step = kind == "step"
    auto = (_STEP_AUTO if is_step else _EXECUTION_AUTO)[to]  # type: ignore[index]  # str-valued enums
    assignments = {**auto, **sets}
    if "status" in assignments:
        raise ValueError("status is set by the transition itself")
    set_sql = ", ".join(["status = %(to_status)s", *(f"{col} = {expr}" for col, expr in assignments.items())])
    cols = "".join(f", i.{name}" for name in source.columns)
    lock = "FOR UPDATE OF t SKIP LOCKED" if skip_locked else "FOR UPDATE OF t"
    step_cols = ", t.execution_id, t.vertex" if is_step else ", t.id AS execution_id, NULL::varchar AS vertex"
    returning_sql = "".join(f", {expr}" for expr in returning)
    step_ref = "id" if is_step else "NULL::bigint"
    message_sql = "src.message" if "message" in source.columns else "%(event_message)s"
    # ``src`` finds rows by primary key only and the status guard sits on the UPDATE: with
    # the status in ``src``'s WHERE, stale statistics can make the planner scan a status
    # index and nested-loop it against the input (seen: 100 ms for 150 rows).
    sql = f"""
        WITH i AS ({source.sql}),
        src AS (
            SELECT t.id, t.status AS from_status{step_cols}{cols}
            FROM i JOIN {table} t ON t.id = i.id
            ORDER BY t.id
            {lock}
        ),
        moved AS (
            UPDATE {table} s SET {set_sql}
            FROM src WHERE s.id = src.id AND src.from_status = ANY(%(from_statuses)s)
            RETURNING s.id, src.from_status, src.execution_id, src.vertex, s.attempt, {message_sql} AS message
                      {returning_sql}
        ),
        ev AS (
            INSERT INTO executions_event (execution_id, step_id, vertex, from_status, to_status, attempt,
                                          message, created_at)
            SELECT execution_id, {step_ref}, coalesce(vertex, ''), from_status, %(to_status)s, attempt,
                   coalesce(message, ''), now()
            FROM moved
        )
        SELECT {", ".join(select) or "*"} FROM moved
    """  # noqa: S608 - constant SQL fragments and fixed column names only
    params = {**source.params, "to_status": str(to), "from_statuses": sources, "event_message": message}
    return sql, params


def _fetch(cursor: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor.execute(sql, params)
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _step_statement(to: str, source: _Source, *, sets: dict[str, str] | None, from_: Iterable[str] | None,
                    skip_locked: bool, returning: Sequence[str], message: str | None,
                    select: Sequence[str] = ()) -> tuple[str, dict]:
    allowed = allowed_from(STEP_TRANSITIONS, to)
    sources = [s for s in allowed if from_ is None or s in set(from_)]
    return _statement(table="executions_step", kind="step", to=to, sources=sources, source=source, sets=sets or {},
                      skip_locked=skip_locked, returning=returning, message=message, select=select)


def _move_steps(cursor: Any, to: str, source: _Source, *, sets: dict[str, str] | None = None,
                from_: Iterable[str] | None = None, skip_locked: bool = False,
                returning: Sequence[str] = (), message: str | None = None,
                select: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Move the steps named by ``source`` to ``to``; returns the rows that moved (their
    ``select`` columns, default all).

    ``from_`` narrows the allowed source statuses. SQL in ``sets`` may refer to the step as
    ``s`` and to source columns as ``src.<name>``.
    """
    return _fetch(cursor, *_step_statement(to, source, sets=sets, from_=from_, skip_locked=skip_locked,
                                           returning=returning, message=message, select=select))


def _move_step_ids(cursor: Any, to: str, source: _Source, *, sets: dict[str, str] | None = None,
                   from_: Iterable[str] | None = None) -> set[int]:
    """``_move_steps`` for a caller that needs only which steps moved: the statement returns
    their ids alone (a commit moves hundreds of rows; their other columns cost a row dict,
    a UUID and some strings each, on the drain's thread, for nothing)."""
    cursor.execute(*_step_statement(to, source, sets=sets, from_=from_, skip_locked=False, returning=(),
                                    message=None, select=("id",)))
    return {row[0] for row in cursor.fetchall()}


def _move_executions(cursor: Any, to: str, source: _Source, *, sets: dict[str, str] | None = None,
                     from_: Iterable[str] | None = None, message: str | None = None,
                     counts: FanoutCounts | None = None) -> list[dict[str, Any]]:
    """Move executions to ``to`` and keep fan-out counts, merge wake-ups and redrive in step
    (now, or — given ``counts`` — when the caller applies them)."""
    allowed = allowed_from(EXECUTION_TRANSITIONS, to)
    sources = [s for s in allowed if from_ is None or s in set(from_)]
    # Only what the fan-out bookkeeping and the metrics read (``_propagate_to_fanouts``).
    sql, params = _statement(table="executions_execution", kind="execution", to=to, sources=sources,
                             source=source, sets=sets or {}, skip_locked=False,
                             returning=("s.spawned_by_id", "s.status"), message=message,
                             select=("id", "from_status", "spawned_by_id", "status"))
    moved = _fetch(cursor, sql, params)
    metrics.children_finished(moved)
    if counts is not None:
        counts.moved += moved
    else:
        _propagate_to_fanouts(cursor, moved)
    return moved


class FanoutCounts:
    """The fan-out counts of the execution transitions given it (their ``counts=``), applied
    together by ``apply`` — one statement, at the end of the caller's transaction — instead
    of with each transition.

    A fan-out's counter row is the one row every child's commit updates: a transaction holds
    its lock from that update to COMMIT, and every other worker committing a child of the
    same fan-out waits for it. The drain's commit (executions/worker/commits.py) therefore
    does everything else first — steps, payloads, the call log, the slot hand-over — and
    takes that lock last. A transition given no accumulator counts at once."""

    def __init__(self) -> None:
        self.moved: list[dict[str, Any]] = []

    def apply(self, cursor: Any) -> None:
        moved, self.moved = self.moved, []
        _propagate_to_fanouts(cursor, moved)


# --- fan-out bookkeeping ---------------------------------------------------------------------

_COUNTER = {E.SUCCEEDED: 0, E.FAILED: 1, E.CANCELLED: 2}

# Counts move with each child's terminal transition, one statement per commit for every
# fan-out it touches (rows locked in step id order).
_ADJUST_FANOUTS = f"""
    WITH d AS (
        SELECT unnest(%(ids)s::bigint[]) AS step_id, unnest(%(s)s::int[]) AS s,
               unnest(%(f)s::int[]) AS f, unnest(%(c)s::int[]) AS c, unnest(%(reopened)s::int[]) AS reopened
    ),
    locked AS (
        SELECT f.step_id FROM executions_fanout f JOIN d USING (step_id) ORDER BY f.step_id FOR UPDATE OF f
    )
    UPDATE executions_fanout f
    SET succeeded = f.succeeded + d.s, failed = f.failed + d.f, cancelled = f.cancelled + d.c
    FROM d JOIN locked USING (step_id)
    WHERE f.step_id = d.step_id
    RETURNING f.step_id, f.execution_id, f.merge_vertex, f.spawner_vertex, f.max_concurrency, f.free_slots,
              f.release_cursor, d.reopened > 0 AS reopened, {FANOUT_DECIDED} AS decided,
              f.succeeded, f.failed, f.cancelled, f.total, f.min_successful
"""  # noqa: S608 - constant SQL fragments and fixed column names only

# Only for fan-outs with maxConcurrency (their rows are locked by _ADJUST_FANOUTS, in the same
# transaction): a child that entered (left) a terminal status frees (takes back) a slot if it
# held one — if its first step was ever released (due_at is not records.HELD_UNTIL). A bad
# item's child has no step, a cancelled held child never ran: neither frees a slot. Apart
# from the counts so that a commit of children of fan-outs without a limit — nearly all —
# does not send every child's id, fan-out and sign for nothing (a tenth of a drain's commit).
_ADJUST_FREE_SLOTS = """
    WITH children AS (
        SELECT unnest(%(child_fanouts)s::bigint[]) AS step_id, unnest(%(children)s::uuid[]) AS execution_id,
               unnest(%(signs)s::int[]) AS sign
    )
    UPDATE executions_fanout f
    SET free_slots = f.free_slots + coalesce((
            SELECT sum(c.sign) FROM children c WHERE c.step_id = f.step_id AND EXISTS (
                SELECT 1 FROM executions_step st
                WHERE st.execution_id = c.execution_id AND st.due_at <> %(held_until)s::timestamptz)), 0)
    WHERE f.step_id = ANY(%(ids)s)
    RETURNING f.step_id, f.free_slots
"""

# After releasing held children: the slots they took, and where the next release starts.
_RELEASED = """
    UPDATE executions_fanout f SET free_slots = f.free_slots - r.n,
                                   release_cursor = greatest(f.release_cursor, r.last + 1)
    FROM unnest(%(ids)s::bigint[], %(counts)s::int[], %(lasts)s::int[]) AS r(step_id, n, last)
    WHERE f.step_id = r.step_id
"""

_MERGE_STEPS = """
    SELECT s.id FROM executions_step s
    JOIN unnest(%(executions)s::uuid[], %(vertices)s::varchar[]) AS m(execution_id, vertex)
      ON s.execution_id = m.execution_id AND s.vertex = m.vertex
"""


def _propagate_to_fanouts(cursor: Any, moved: list[dict[str, Any]]) -> None:
    deltas: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for row in moved:
        if row["spawned_by_id"] is None:
            continue
        delta = deltas[row["spawned_by_id"]]
        if row["status"] in _COUNTER:
            delta[_COUNTER[row["status"]]] += 1
        if row["from_status"] in _COUNTER:
            delta[_COUNTER[row["from_status"]]] -= 1
            delta[3] += 1  # a child left a terminal status: the merge may need re-opening
    deltas = {key: value for key, value in deltas.items() if any(value[:3])}
    if not deltas:
        return
    keys = sorted(deltas)
    fanouts = _fetch(cursor, _ADJUST_FANOUTS, {
        "ids": keys,
        "s": [deltas[k][0] for k in keys],
        "f": [deltas[k][1] for k in keys],
        "c": [deltas[k][2] for k in keys],
        "reopened": [deltas[k][3] for k in keys],
    })
    limited = [f for f in fanouts if f["max_concurrency"] is not None]
    if limited:
        ids = {f["step_id"] for f in limited}
        # (fan-out, child execution, +1 entered / -1 left a terminal status), for these fan-outs only.
        children = [(row["spawned_by_id"], row["id"], sign) for row in moved if row["spawned_by_id"] in ids
                    for sign, status in ((1, row["status"]), (-1, row["from_status"])) if status in _COUNTER]
        _adjust_free_slots(cursor, limited, children)
    _release_held(cursor, [f for f in limited if f["free_slots"] > 0])
    with_merge = [f for f in fanouts if f["merge_vertex"]]
    _reopen_merges(cursor, [f for f in with_merge if f["reopened"]])
    _wake_merges(cursor, [f for f in with_merge if f["decided"]])
    _reevaluate_merge_outputs(cursor, [f for f in with_merge if f["decided"]])


def _adjust_free_slots(cursor: Any, fanouts: list[dict[str, Any]], children: list[tuple[int, Any, int]]) -> None:
    """maxConcurrency: the slots that children entering (+1) or leaving (-1) a terminal
    status free or take back; updates ``free_slots`` of the ``fanouts`` rows in place."""
    cursor.execute(_ADJUST_FREE_SLOTS, {
        "ids": [f["step_id"] for f in fanouts],
        "child_fanouts": [c[0] for c in children],
        "children": [c[1] for c in children],
        "signs": [c[2] for c in children],
        "held_until": records.HELD_UNTIL,
    })
    free = dict(cursor.fetchall())
    for fan in fanouts:
        fan["free_slots"] = free[fan["step_id"]]


def _release_held(cursor: Any, fanouts: list[dict[str, Any]]) -> None:
    """maxConcurrency: free slots go to held children, in item order (O(1) per finished child)."""
    if not fanouts:
        return
    released = records.release_held_steps(cursor, [
        (f["execution_id"], f["spawner_vertex"], f["release_cursor"], f["free_slots"]) for f in fanouts])
    done = [(f["step_id"], *released[(f["execution_id"], f["spawner_vertex"])]) for f in fanouts
            if (f["execution_id"], f["spawner_vertex"]) in released]
    if done:
        cursor.execute(_RELEASED, {"ids": [d[0] for d in done], "counts": [d[1] for d in done],
                                   "lasts": [d[2] for d in done]})


def _merge_source(fanouts: list[dict[str, Any]]) -> _Source:
    return _Source(_MERGE_STEPS, {
        "executions": [f["execution_id"] for f in fanouts],
        "vertices": [f["merge_vertex"] for f in fanouts],
    })


def _wake_merges(cursor: Any, fanouts: list[dict[str, Any]], message: str = "children decided the merge") -> bool:
    if fanouts and _move_steps(cursor, S.READY, _merge_source(fanouts), from_=[S.WAITING],
                              sets={"due_at": "now()", "wait_reason": "''"}, message=message):
        notify.work_created(cursor)
        return True
    return False


def wake_decided_merges(cursor: Any, fanouts: list[dict[str, Any]]) -> bool:
    """WAITING merges of fan-outs an operator's edit decided (fanout/edits.py, issue 31) run now."""
    return _wake_merges(cursor, fanouts, message="an edit of the fan-out decided the merge")


_SUCCEEDED_MERGES = """
    SELECT s.id, s.execution_id, s.vertex, s.attempt FROM executions_step s
    JOIN unnest(%(executions)s::uuid[], %(vertices)s::varchar[]) AS m(execution_id, vertex)
      ON s.execution_id = m.execution_id AND s.vertex = m.vertex
    WHERE s.status = 'SUCCEEDED'
"""


def _reevaluate_merge_outputs(cursor: Any, fanouts: list[dict[str, Any]]) -> None:
    """S9: a MERGE that already succeeded — its tolerated failures were then retried — stores
    its output again from the counts and the children as they are now, so ``"FAILED": 41``
    does not outlive the 41 retries that succeeded. (Only a re-run child can finish after its
    merge succeeded: a merge succeeds once every child has finished.) One look-up per commit
    that decides fan-outs; nothing for a fan-out whose merge has not run."""
    if not fanouts:
        return
    cursor.execute(_SUCCEEDED_MERGES, _merge_source(fanouts).params)
    merged = {(execution, vertex): (step_id, attempt) for step_id, execution, vertex, attempt in cursor.fetchall()}
    notes = []
    for fan in fanouts:
        if (key := (fan["execution_id"], fan["merge_vertex"])) not in merged:
            continue
        counts = merge_counts(fan)
        payloads.put_merge_output(cursor, fan["execution_id"], fan["merge_vertex"], spawner=fan["spawner_vertex"],
                                  counts=counts, total=fan["total"], succeeded_only=fan["min_successful"] is not None)
        step_id, attempt = merged[key]
        notes.append((fan["execution_id"], step_id, fan["merge_vertex"], attempt,
                      "merge output re-evaluated after retried children finished: "
                      + ", ".join(f"{name} {n:,}" for name, n in counts.items())))
    note(cursor, notes)


def _reopen_merges(cursor: Any, fanouts: list[dict[str, Any]]) -> None:
    """Redrive: a merge that failed re-opens when one of its children is retried, and its
    execution goes back from FAILED to RUNNING (which may re-open the grandparent's)."""
    if not fanouts:
        return
    reopened = _move_steps(cursor, S.WAITING, _merge_source(fanouts), from_=[S.FAILED],
                          sets={"error": "''", "attempt": "s.attempt + 1",
                                "max_attempts": "greatest(s.max_attempts, s.attempt + 1)",
                                "wait_reason": "'waiting for children'", "due_at": NO_DUE_TIME},
                          message="re-opened: a child was retried (redrive)")
    if reopened:
        _move_executions(cursor, E.RUNNING, _ids({row["execution_id"] for row in reopened}, "uuid"),
                        from_=[E.FAILED], sets={"error": "''"}, message="redrive: a child was retried")


# --- notes -------------------------------------------------------------------------------------

_NOTE = """
    INSERT INTO executions_event (execution_id, step_id, vertex, from_status, to_status, attempt, message, created_at)
    SELECT unnest(%(executions)s::uuid[]), unnest(%(steps)s::bigint[]), unnest(%(vertices)s::varchar[]),
           '', '', unnest(%(attempts)s::int[]), unnest(%(messages)s::text[]), now()
"""


def note(cursor: Any, entries: Sequence[tuple[Any, int | None, str, int | None, str]]) -> None:
    """Append informational events: (execution_id, step_id, vertex, attempt, message)."""
    if entries:
        cursor.execute(_NOTE, {
            "executions": [e[0] for e in entries],
            "steps": [e[1] for e in entries],
            "vertices": [e[2] for e in entries],
            "attempts": [e[3] for e in entries],
            "messages": [e[4] for e in entries],
        })


# --- named transitions: steps ------------------------------------------------------------------

# Due, expired leases (the reaper), in lease order; SKIP LOCKED: a row another transaction
# holds is being moved by it right now. ``which``: ``retry`` — attempts left; ``result`` — the
# last attempt, with a wait's result there to apply (in its state, or on its wait row: the
# callback came while the HTTP call that handed out the token ran); ``fail`` — the last
# attempt and nothing to apply.
_EXPIRED = """
    SELECT s.id FROM executions_step s
    WHERE s.status = 'RUNNING' AND s.lease_expires_at < now()
      AND CASE WHEN s.attempt < s.max_attempts THEN 'retry'
               WHEN (s.state->'wait'->>'attempt')::int = s.attempt
                    OR EXISTS (SELECT 1 FROM executions_wait w
                               WHERE w.step_id = s.id AND w.attempt = s.attempt AND w.completion IS NOT NULL)
               THEN 'result' ELSE 'fail' END = %(which)s
    ORDER BY s.lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
"""

# The unfinished steps of some executions (a cancel).
_OPEN_STEPS_OF = """
    SELECT s.id FROM executions_step s
    WHERE s.execution_id = ANY(%(executions)s) AND s.status IN ('READY', 'RUNNING', 'WAITING')
"""


def claim_steps(cursor: Any, step_ids: Sequence[int], *, lease_seconds: float, worker: str,
                queued: Sequence[int] = ()) -> list[dict[str, Any]]:
    """READY → RUNNING with a fresh lease (token, expiry in database time, holder); the
    destination steps in ``queued`` without a slot (leases.py, "Slots")."""
    source = _ids(step_ids)
    return _move_steps(
        cursor, S.RUNNING, _Source(source.sql, {**source.params, "lease": lease_seconds, "worker": worker,
                                                "queued": list(queued)}),
        from_=[S.READY], skip_locked=True,
        sets={"lease_token": "gen_random_uuid()",
              "lease_expires_at": "now() + make_interval(secs => %(lease)s)",
              "leased_by": "%(worker)s",
              "holds_slot": "s.id <> ALL(%(queued)s::bigint[])"},
        returning=("s.lease_token", "s.state", "s.prev_vertex", "s.max_attempts", "s.destination_id",
                   "now() AS claimed_at", "s.lease_expiries", "s.holds_slot", "s.throttled_waits"),
        # what leases._claim reads:
        select=("id", "execution_id", "vertex", "prev_vertex", "attempt", "max_attempts", "lease_token", "state",
                "destination_id", "claimed_at", "lease_expiries", "holds_slot", "throttled_waits"),
    )


def release_steps(cursor: Any, step_ids: Sequence[int], *, message: str) -> int:
    """RUNNING → READY now, no attempt consumed (a worker hands its steps back)."""
    return len(_move_steps(cursor, S.READY, _ids(step_ids), from_=[S.RUNNING], sets={"due_at": "now()"},
                           message=message))


# A wait's result that its lost worker had not turned into the step's outcome yet — in its state
# (a woken wait), or on its wait row only (a callback that came while the HTTP call that handed
# out the token was still running) — goes to the step's ``next`` attempt with it: the callback
# was accepted (200), so a lost worker must not lose it (core/waits.py).
def _carry_wait_result(next_attempt: str) -> str:
    return f"""CASE
    WHEN (s.state->'wait'->>'attempt')::int = s.attempt
    THEN jsonb_set(s.state, '{{wait,attempt}}', to_jsonb({next_attempt}))
    ELSE coalesce(s.state || (SELECT jsonb_build_object('wait', jsonb_build_object(
                                         'attempt', {next_attempt}, 'result', w.completion))
                              FROM executions_wait w
                              WHERE w.step_id = s.id AND w.attempt = s.attempt AND w.completion IS NOT NULL),
                  s.state) END"""  # noqa: S608 - a constant column expression


def requeue_expired(cursor: Any, limit: int) -> list[dict[str, Any]]:
    """Expired leases with attempts left: RUNNING → READY, attempt + 1 (the reaper); a wait's
    result the lost worker had not used yet goes with the step to its next attempt. On the
    last attempt, a step with such a result is re-queued at the same attempt to apply it
    (applying an accepted result is no new attempt: S5's lease only decides who applies it)."""
    requeued = _move_steps(
        cursor, S.READY, _Source(_EXPIRED, {"limit": limit, "which": "retry"}),
        from_=[S.RUNNING], skip_locked=True,
        sets={"attempt": "s.attempt + 1", "lease_expiries": "s.lease_expiries + 1", "due_at": "now()",
              "wait_reason": "''", "state": _carry_wait_result("s.attempt + 1")},
        message="lease expired: the worker was lost; re-queued for another attempt",
    )
    return requeued + _move_steps(
        cursor, S.READY, _Source(_EXPIRED, {"limit": limit, "which": "result"}),
        from_=[S.RUNNING], skip_locked=True,
        sets={"lease_expiries": "s.lease_expiries + 1", "due_at": "now()", "wait_reason": "''",
              "state": _carry_wait_result("s.attempt")},
        message="lease expired on the last attempt with its wait's result there: re-queued to apply it",
    )


def fail_expired(cursor: Any, limit: int) -> list[dict[str, Any]]:
    """Expired leases on their last attempt with nothing to apply: RUNNING → FAILED (a poison
    pill ends)."""
    return _move_steps(
        cursor, S.FAILED, _Source(_EXPIRED, {"limit": limit, "which": "fail"}),
        from_=[S.RUNNING], skip_locked=True,
        sets={"lease_expiries": "s.lease_expiries + 1",
              "error": "format('lease expired %%s times (its worker was lost each time); gave up after %%s attempts',"
                       " s.lease_expiries + 1, s.attempt)"},
        returning=("s.error",),
        message="lease expired on the last attempt: step failed",
    )


def succeed_steps(cursor: Any, step_ids: Sequence[int]) -> set[int]:
    """RUNNING → SUCCEEDED (a committed result)."""
    return _move_step_ids(cursor, S.SUCCEEDED, _ids(step_ids), from_=[S.RUNNING])


def retry_steps_later(cursor: Any, step_ids: Sequence[int], *, errors: Sequence[str], delays: Sequence[float],
                      messages: Sequence[str]) -> set[int]:
    """RUNNING → READY after a retryable failure: attempt + 1, due after its backoff."""
    source = _rows({"error": ("text", errors), "due_in": ("float8", delays), "message": ("text", messages),
                    "reason": ("text", [f"retry backoff after: {e}"[:300] for e in errors])}, id_values=step_ids)
    return _move_step_ids(cursor, S.READY, source, from_=[S.RUNNING], sets={
        "attempt": "s.attempt + 1", "error": "src.error", "wait_reason": "src.reason",
        "due_at": "now() + make_interval(secs => src.due_in)"})


def fail_steps(cursor: Any, step_ids: Sequence[int], *, errors: Sequence[str]) -> set[int]:
    """RUNNING → FAILED for good (no attempts left, or not retryable)."""
    source = _rows({"error": ("text", errors), "message": ("text", errors)}, id_values=step_ids)
    return _move_step_ids(cursor, S.FAILED, source, from_=[S.RUNNING], sets={"error": "src.error"})


def wait_steps(cursor: Any, step_ids: Sequence[int], *, due_at: Sequence[Any], due_in: Sequence[float | None],
               reasons: Sequence[str], states: Sequence[str | None], throttled: Sequence[bool] = ()) -> set[int]:
    """RUNNING → READY at a due time (a timer, a deferral, a destination's cooldown), no
    attempt consumed; ``due_at`` wins over ``due_in`` seconds from now; a ``state`` (JSON text)
    replaces the step's; a ``throttled`` wait counts one more of the round's throttled waits
    (executions/core/flow.py)."""
    source = _rows({"due_at": ("timestamptz", due_at), "due_in": ("float8", due_in),
                    "reason": ("text", [r[:300] for r in reasons]), "state": ("jsonb", states),
                    "throttled": ("int", [int(t) for t in throttled] or [0] * len(step_ids)),
                    "message": ("text", reasons)}, id_values=step_ids)
    return _move_step_ids(cursor, S.READY, source, from_=[S.RUNNING], sets={
        "due_at": "coalesce(src.due_at, now() + make_interval(secs => coalesce(src.due_in, 0)))",
        "wait_reason": "src.reason", "state": "coalesce(src.state, s.state)",
        "throttled_waits": "s.throttled_waits + src.throttled"})


# A WAITING step's due time is its wait's deadline (a callback, an event: ``await_steps``), which
# the drain waits for like a timer's (worker/housekeeping.py NEXT_DUE); one waiting for a
# signal (a merge for its children) has none: records.NO_DUE_TIME, after every deadline.
NO_DUE_TIME = f"'{records.NO_DUE_TIME}'::timestamptz"


def signal_steps(cursor: Any, step_ids: Sequence[int], *, reasons: Sequence[str],
                 states: Sequence[str | None]) -> set[int]:
    """RUNNING → WAITING until another transition wakes it (a merge waiting for children)."""
    source = _rows({"reason": ("text", [r[:300] for r in reasons]), "state": ("jsonb", states),
                    "message": ("text", reasons)}, id_values=step_ids)
    return _move_step_ids(cursor, S.WAITING, source, from_=[S.RUNNING], sets={
        "wait_reason": "src.reason", "state": "coalesce(src.state, s.state)", "due_at": NO_DUE_TIME})


# --- named transitions: waits for the outside world (S27, core/waits.py) --------------------------

def await_steps(cursor: Any, step_ids: Sequence[int], *, due_at: Sequence[Any], reasons: Sequence[str]) -> set[int]:
    """RUNNING → WAITING for a callback or an event, holding no lease and no slot, until
    ``due_at`` (its timeout or heartbeat deadline, database time: ``time_out_waits``)."""
    source = _rows({"due_at": ("timestamptz", due_at), "reason": ("text", [r[:300] for r in reasons]),
                    "message": ("text", reasons)}, id_values=step_ids)
    return _move_step_ids(cursor, S.WAITING, source, from_=[S.RUNNING],
                          sets={"due_at": "src.due_at", "wait_reason": "src.reason"})


# A waiting step's result (``wait``: its attempt and the completion, or why it timed out) goes
# into its state; its vertex turns it into the step's outcome when it runs again (vertices/wait.py).
_WAIT_RESULT = ("s.state || jsonb_build_object('wait', jsonb_build_object('attempt', s.attempt, "
                "src.result_key, src.result))")

# The waiting steps of some completed waits (callbacks, an operator), at the attempt that waits.
_COMPLETED_WAITS = """
    SELECT w.step_id AS id, 'result'::text AS result_key, w.completion AS result
    FROM executions_wait w JOIN executions_step s ON s.id = w.step_id AND s.attempt = w.attempt
    WHERE w.id = ANY(%(waits)s::bigint[]) AND w.completion IS NOT NULL
"""

# The open event waits that an event matches: its name, in its workspace, every match pair equal.
_MATCHED_WAITS = """
    SELECT w.step_id AS id, 'result'::text AS result_key,
           jsonb_build_object('status', 'SUCCEEDED', 'output', %(data)s::jsonb) AS result
    FROM executions_wait w JOIN executions_step s ON s.id = w.step_id AND s.attempt = w.attempt
    WHERE w.workspace_id = %(workspace)s AND w.kind = 'event' AND w.event_name = %(name)s
      AND w.completion IS NULL AND s.status = 'WAITING'
      AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(w.match) m
                      WHERE (%(data)s::jsonb #> ARRAY(SELECT jsonb_array_elements_text(m->'path')))
                            IS DISTINCT FROM m->'value')
"""

# Due waits (their timeout or heartbeat deadline passed), oldest first; SKIP LOCKED: a step
# another transaction holds is being completed or cancelled right now.
_DUE_WAITS = """
    SELECT s.id, 'timedOut'::text AS result_key,
           to_jsonb(CASE WHEN w.kind = 'event'
                         THEN format('timed out after %%ss waiting for event %%s',
                                     trim_scale(w.timeout_seconds::numeric), w.event_name)
                         WHEN w.heartbeat_seconds IS NOT NULL AND s.due_at < w.deadline
                         THEN format('timed out after %%ss waiting for a heartbeat',
                                     trim_scale(w.heartbeat_seconds::numeric))
                         ELSE format('timed out after %%ss waiting for a callback',
                                     trim_scale(w.timeout_seconds::numeric)) END) AS result
    FROM executions_step s JOIN executions_wait w ON w.step_id = s.id AND w.attempt = s.attempt
    WHERE s.status = 'WAITING' AND s.due_at <= now() AND w.completion IS NULL
    ORDER BY s.due_at
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
"""


def _resume(cursor: Any, source: _Source, message: str | None) -> list[dict[str, Any]]:
    moved = _move_steps(cursor, S.READY, source, from_=[S.WAITING], message=message,
                        sets={"due_at": "now()", "wait_reason": "''", "state": _WAIT_RESULT})
    if moved:
        notify.work_created(cursor)
    return moved


def resume_completed_waits(cursor: Any, wait_ids: Sequence[int], *, message: str) -> int:
    """WAITING → READY now for the steps of completed waits; their vertex then finishes
    with the completion (its output, or its error under the retry policy)."""
    if not wait_ids:
        return 0
    return len(_resume(cursor, _Source(_COMPLETED_WAITS, {"waits": list(wait_ids)}, ("result_key", "result")),
                       message))


def resume_matched_waits(cursor: Any, *, workspace: int, name: str, data_text: str) -> list[dict[str, Any]]:
    """WAITING → READY now for every step waiting for this event that it matches (one
    set-based statement; steps locked in id order); returns the steps that moved."""
    return _resume(cursor, _Source(_MATCHED_WAITS, {"workspace": workspace, "name": name, "data": data_text},
                                   ("result_key", "result")), f"event {name} delivered")


def time_out_waits(cursor: Any, limit: int) -> list[dict[str, Any]]:
    """WAITING → READY now for waits past their deadline; their vertex then fails the attempt
    ("timed out after Ns waiting for a callback") and the retry policy applies."""
    return _resume(cursor, _Source(_DUE_WAITS, {"limit": limit}, ("result_key", "result")),
                   "the wait timed out")


def cancel_open_steps(cursor: Any, execution_ids: Sequence[Any], *, message: str) -> int:
    """Every unfinished step of these executions → CANCELLED."""
    if not execution_ids:
        return 0
    return len(_move_steps(cursor, S.CANCELLED, _Source(_OPEN_STEPS_OF, {"executions": list(execution_ids)}),
                           message=message))


# A new round (S16): attempt + 1 and ``budget`` more attempts, due now.
_NEW_ROUND = {"attempt": "s.attempt + 1", "max_attempts": "s.attempt + src.budget", "due_at": "now()",
              "wait_reason": "''", "error": "''", "throttled_waits": "0"}


def retry_failed_steps(cursor: Any, step_ids: Sequence[int], *, budgets: Sequence[int],
                       message: str) -> list[dict[str, Any]]:
    """FAILED → READY now (an operator retry): attempt + 1 and ``budget`` more attempts."""
    source = _rows({"budget": ("int", budgets)}, id_values=step_ids)
    return _move_steps(cursor, S.READY, source, from_=[S.FAILED], sets=_NEW_ROUND, message=message)


# The CANCELLED steps of executions the failFast policy cancelled (S28), with the retry budget
# of each step's vertex (``budgets``: version id, vertex, budget; 1 where none is given).
_FAIL_FAST_CANCELLED_STEPS = """
    SELECT s.id, coalesce(b.budget, 1) AS budget
    FROM executions_execution e
    JOIN executions_step s ON s.execution_id = e.id AND s.status = 'CANCELLED'
    LEFT JOIN unnest(%(versions)s::bigint[], %(vertices)s::varchar[], %(budgets)s::int[])
         AS b(version_id, vertex, budget)
      ON b.version_id = e.version_id AND b.vertex = s.vertex
    WHERE e.id = ANY(%(executions)s::uuid[]) AND e.status = 'CANCELLED' AND e.cancel_cause = 'failFast'
"""


def rerun_cancelled_steps(cursor: Any, execution_ids: Sequence[Any], *, budgets: tuple[list[int], list[str], list[int]],
                          message: str) -> list[dict[str, Any]]:
    """S28: the CANCELLED steps of executions that the failFast policy cancelled (never an
    operator's cancel) → READY now, a new round as for a failed step. ``budgets`` is the
    retry budget per (version ids, vertices, budgets). A first step that was held for a slot
    of its fan-out's maxConcurrency (never released) stays held — it takes no slot; see
    ``rewind_release`` — and is returned with ``held`` true."""
    if not execution_ids:
        return []
    versions_, vertices_, budgets_ = budgets
    source = _Source(_FAIL_FAST_CANCELLED_STEPS, {
        "executions": list(execution_ids), "versions": versions_, "vertices": vertices_, "budgets": budgets_,
        "held_until": records.HELD_UNTIL, "held_reason": records.HELD_REASON}, ("budget",))
    held = "s.due_at = %(held_until)s::timestamptz"
    return _move_steps(cursor, S.READY, source, from_=[S.CANCELLED], sets={
        **_NEW_ROUND, "due_at": f"CASE WHEN {held} THEN s.due_at ELSE now() END",
        "wait_reason": f"CASE WHEN {held} THEN %(held_reason)s ELSE '' END"},
        returning=("s.due_at = %(held_until)s::timestamptz AS held",), message=message)


# maxConcurrency: held children re-run below a fan-out's release cursor move it back to them.
_REWIND_RELEASE = """
    UPDATE executions_fanout f SET release_cursor = least(f.release_cursor, r.lo)
    FROM unnest(%(ids)s::bigint[], %(los)s::int[]) AS r(step_id, lo)
    WHERE f.step_id = r.step_id AND f.max_concurrency IS NOT NULL
    RETURNING f.step_id, f.execution_id, f.spawner_vertex, f.free_slots, f.release_cursor
"""


def rewind_release(cursor: Any, lowest: dict[int, int]) -> None:
    """S28, maxConcurrency: children re-run with their first step held (``lowest``: fan-out
    step id → the lowest item index among them) are released in item order like any held
    child — the fan-out's release cursor moves back to them (every held child's index stays
    at or above it) — and at once while the fan-out has free slots. Call it after the
    children's own transition, which has locked the fan-out rows (lock order)."""
    if not lowest:
        return
    keys = sorted(lowest)
    fanouts = _fetch(cursor, _REWIND_RELEASE, {"ids": keys, "los": [lowest[k] for k in keys]})
    _release_held(cursor, [f for f in fanouts if f["free_slots"] > 0])


# Spawner steps that a failFast stop ended early: SUCCEEDED with items left to spawn.
_STOPPED_SPAWNERS = """
    SELECT s.id, b.budget FROM unnest(%(steps)s::bigint[], %(budgets)s::int[]) AS b(id, budget)
    JOIN executions_step s ON s.id = b.id AND s.status = 'SUCCEEDED'
    JOIN executions_fanout f ON f.step_id = s.id AND NOT f.spawn_complete AND f.cursor < f.total
"""


def reopen_stopped_spawners(cursor: Any, step_ids: Sequence[int], *, budgets: Sequence[int],
                            message: str) -> list[dict[str, Any]]:
    """S28: SUCCEEDED → READY now for spawner steps that a failFast merge stopped before
    they had spawned every item (a new round); they resume at their cursor. A spawner step
    that is not SUCCEEDED is not selected, so not locked: a spawner still running sees the
    re-opened fan-out at its next batch (fanout.py)."""
    if not step_ids:
        return []
    source = _Source(_STOPPED_SPAWNERS, {"steps": list(step_ids), "budgets": list(budgets)}, ("budget",))
    return _move_steps(cursor, S.READY, source, from_=[S.SUCCEEDED], sets=_NEW_ROUND, message=message)


# --- named transitions: executions ---------------------------------------------------------------

# An execution that finishes straight from PENDING ran from its first step's claim.
_STARTED_AT = "coalesce(s.started_at, src.started, now())"
_ROUND_STARTED_AT = "coalesce(s.attempt_started_at, src.started, now())"
_STARTS = {"started_at": _STARTED_AT, "attempt_started_at": _ROUND_STARTED_AT}


def run_executions(cursor: Any, execution_ids: Sequence[Any], *, started: Sequence[Any],
                   counts: FanoutCounts | None = None) -> None:
    """PENDING → RUNNING: the execution visibly runs (``started``: its first claim time)."""
    if execution_ids:
        _move_executions(cursor, E.RUNNING, _rows({"started": ("timestamptz", started)}, "uuid",
                                                  id_values=execution_ids),
                         from_=[E.PENDING], sets=_STARTS, counts=counts)


def succeed_executions(cursor: Any, execution_ids: Sequence[Any], *, output_vertices: Sequence[str],
                       started: Sequence[Any], counts: FanoutCounts | None = None) -> None:
    """PENDING/RUNNING → SUCCEEDED; ``output_vertices``: whose output is the execution's."""
    if execution_ids:
        _move_executions(cursor, E.SUCCEEDED, _rows({
            "output_vertex": ("varchar", output_vertices), "started": ("timestamptz", started),
        }, "uuid", id_values=execution_ids), from_=[E.PENDING, E.RUNNING],
            sets={"output_vertex": "src.output_vertex", "error": "''", **_STARTS}, counts=counts)


def fail_executions(cursor: Any, execution_ids: Sequence[Any], *, errors: Sequence[str],
                    started: Sequence[Any], counts: FanoutCounts | None = None) -> None:
    """PENDING/RUNNING → FAILED with its error."""
    if execution_ids:
        _move_executions(cursor, E.FAILED, _rows({"error": ("text", errors), "message": ("text", errors),
                                                  "started": ("timestamptz", started)},
                                                 "uuid", id_values=execution_ids),
                         from_=[E.PENDING, E.RUNNING], sets={"error": "src.error", **_STARTS},
                         counts=counts)


def cancel_executions(cursor: Any, execution_ids: Sequence[Any], *, message: str,
                      cause: str = CancelCause.OPERATOR, reason: str | None = None) -> int:
    """Unfinished executions → CANCELLED, recording ``cause`` (models.CancelCause) and, if
    given, ``reason`` as their error (a quorum's: "the merge reached minSuccessful"); returns
    how many moved."""
    return len(cancelled_executions(cursor, execution_ids, message=message, cause=cause, reason=reason))


def cancelled_executions(cursor: Any, execution_ids: Sequence[Any], *, message: str,
                         cause: str = CancelCause.OPERATOR, reason: str | None = None) -> set[Any]:
    """``cancel_executions``, returning the ids of those that moved."""
    if not execution_ids:
        return set()
    source = _ids(execution_ids, "uuid")
    sets = {"cancel_cause": "%(cause)s", **({"error": "%(reason)s"} if reason is not None else {})}
    return {row["id"] for row in _move_executions(
        cursor, E.CANCELLED, _Source(source.sql, {**source.params, "cause": str(cause), "reason": reason}),
        sets=sets, message=message)}


# Executions the failFast policy cancelled, among some ids (S28); an operator's cancel is not.
_FAIL_FAST_CANCELLED = """
    SELECT e.id FROM executions_execution e
    WHERE e.id = ANY(%(src_ids)s::uuid[]) AND e.cancel_cause = 'failFast'
"""


def rerun_cancelled_executions(cursor: Any, execution_ids: Sequence[Any], *, message: str,
                               counts: FanoutCounts | None = None) -> int:
    """S28: CANCELLED → PENDING for executions that the failFast policy cancelled (same id,
    same key, attempt + 1); their fan-out counts move as for a failed child that is retried,
    re-opening the merge and the parent (redrive). Returns how many moved."""
    if not execution_ids:
        return 0
    return len(_move_executions(cursor, E.PENDING, _Source(_FAIL_FAST_CANCELLED, {"src_ids": list(execution_ids)}),
                                from_=[E.CANCELLED],
                                sets={"attempt": "s.attempt + 1", "error": "''", "cancel_cause": "''"},
                                message=message, counts=counts))


def retry_executions(cursor: Any, execution_ids: Sequence[Any], *, message: str,
                     counts: FanoutCounts | None = None) -> int:
    """FAILED → PENDING (an operator retry: same id, same key, attempt + 1); returns how many."""
    if not execution_ids:
        return 0
    return len(_move_executions(cursor, E.PENDING, _ids(execution_ids, "uuid"), from_=[E.FAILED],
                                sets={"attempt": "s.attempt + 1", "error": "''"}, message=message, counts=counts))
