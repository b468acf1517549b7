"""The one owner of Execution and Step status changes.

Every status write is a guarded, set-based statement built here::

    WITH src AS (SELECT … FROM <table> JOIN (<rows>) … WHERE status = ANY(<allowed from>)
                 ORDER BY id FOR UPDATE),
         moved AS (UPDATE <table> SET status = <to>, … FROM src … RETURNING …),
         ev AS (INSERT INTO executions_event … SELECT … FROM moved)
    SELECT … FROM moved

so a transition not in the tables below cannot happen, rows are locked in id order, and
each transition appends its event in the same statement. Callers choose *which* rows (a
``source`` query yielding ``id`` and any per-row columns) and extra column values; this
module decides the status and keeps the derived bookkeeping consistent:

* children entering or leaving a terminal status move their fan-out's counts, in the same
  transaction (so a MERGE decides in O(1));
* a fan-out that becomes decided wakes its WAITING merge step;
* a failed child that is retried re-opens a merge that had failed on it, and its parent
  execution (redrive, S9) — recursively up the tree.

Lock order (all writers follow it; see docs/architecture.md): a step before its execution,
a child's rows before its parent's fan-out, the fan-out before the parent's steps, the
parent's steps before the parent execution; rows of one kind in id order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from executions.merge_rule import FANOUT_DECIDED
from executions.models import ExecutionStatus, StepStatus

E, S = ExecutionStatus, StepStatus

STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    S.READY: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.READY, S.WAITING, S.CANCELLED}),
    S.WAITING: frozenset({S.READY, S.CANCELLED}),
    S.FAILED: frozenset({S.READY, S.WAITING}),  # operator retry; merge re-opened by redrive
    S.SUCCEEDED: frozenset(),
    S.CANCELLED: frozenset(),
}

EXECUTION_TRANSITIONS: dict[str, frozenset[str]] = {
    # PENDING → SUCCEEDED/FAILED: its only step finished before it was seen running (engine.py).
    E.PENDING: frozenset({E.RUNNING, E.SUCCEEDED, E.FAILED, E.CANCELLED}),
    E.RUNNING: frozenset({E.SUCCEEDED, E.FAILED, E.CANCELLED}),
    E.FAILED: frozenset({E.PENDING, E.RUNNING}),  # operator retry; redrive of a parent
    E.SUCCEEDED: frozenset(),
    E.CANCELLED: frozenset(),
}


def allowed_from(table: dict[str, frozenset[str]], to: str) -> list[str]:
    sources = sorted(status for status, targets in table.items() if to in targets)
    if not sources:
        raise ValueError(f"no transition leads to {to}")
    return sources


@dataclass(frozen=True)
class Source:
    """Which rows to move: SQL yielding ``id`` plus the named per-row ``columns``; params
    are named (``%(name)s``)."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()


def ids(values: Iterable[Any], cast: str = "bigint") -> Source:
    return Source(f"SELECT unnest(%(src_ids)s::{cast}[]) AS id", {"src_ids": list(values)})


def rows(columns: dict[str, tuple[str, Sequence[Any]]], cast: str = "bigint", *, id_values: Sequence[Any]) -> Source:
    """Per-row values: ``{"error": ("text", [...]), …}`` aligned with ``id_values``."""
    selects = [f"unnest(%(src_ids)s::{cast}[]) AS id"]
    params: dict[str, Any] = {"src_ids": list(id_values)}
    for name, (sql_type, values) in columns.items():
        selects.append(f"unnest(%(src_{name})s::{sql_type}[]) AS {name}")
        params[f"src_{name}"] = list(values)
    return Source(f"SELECT {', '.join(selects)}", params, tuple(columns))


# --- the guarded statement -------------------------------------------------------------------

_STEP_AUTO = {
    S.RUNNING: {"started_at": "coalesce(s.started_at, now())"},
    S.READY: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "NULL"},
    S.WAITING: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "NULL"},
    S.SUCCEEDED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
    S.FAILED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
    S.CANCELLED: {"lease_token": "NULL", "lease_expires_at": "NULL", "finished_at": "now()", "wait_reason": "''"},
}
_EXECUTION_AUTO = {
    E.PENDING: {"finished_at": "NULL"},
    E.RUNNING: {"started_at": "coalesce(s.started_at, now())", "finished_at": "NULL"},
    E.SUCCEEDED: {"finished_at": "now()"},
    E.FAILED: {"finished_at": "now()"},
    E.CANCELLED: {"finished_at": "now()"},
}


def _statement(*, table: str, kind: str, to: str, sources: list[str], source: Source, sets: dict[str, str],
               fenced: bool, skip_locked: bool, returning: Sequence[str], message: str | None) -> tuple[str, dict]:
    is_step = kind == "step"
    auto = (_STEP_AUTO if is_step else _EXECUTION_AUTO)[to]  # type: ignore[index]  # str-valued enums
    assignments = {**auto, **sets}
    if "status" in assignments:
        raise ValueError("status is set by the transition itself")
    set_sql = ", ".join(["status = %(to_status)s", *(f"{col} = {expr}" for col, expr in assignments.items())])
    cols = "".join(f", i.{name}" for name in source.columns)
    fence = " AND src.current_token = src.lease_token" if fenced else ""
    token = ", t.lease_token AS current_token" if fenced else ""
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
            SELECT t.id, t.status AS from_status{token}{step_cols}{cols}
            FROM i JOIN {table} t ON t.id = i.id
            ORDER BY t.id
            {lock}
        ),
        moved AS (
            UPDATE {table} s SET {set_sql}
            FROM src WHERE s.id = src.id AND src.from_status = ANY(%(from_statuses)s){fence}
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
        SELECT * FROM moved
    """  # noqa: S608 - constant SQL fragments and fixed column names only
    params = {**source.params, "to_status": str(to), "from_statuses": sources, "event_message": message}
    return sql, params


def _fetch(cursor: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor.execute(sql, params)
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def move_steps(cursor: Any, to: str, source: Source, *, sets: dict[str, str] | None = None,
               from_: Iterable[str] | None = None, fenced: bool = False, skip_locked: bool = False,
               returning: Sequence[str] = (), message: str | None = None) -> list[dict[str, Any]]:
    """Move the steps named by ``source`` to ``to``; returns the rows that moved.

    ``from_`` narrows the allowed source statuses; ``fenced`` additionally requires the
    row's lease token to equal the source's ``lease_token`` column (a stale worker's result
    matches nothing). SQL in ``sets`` may refer to the step as ``s`` and to source columns
    as ``src.<name>``.
    """
    allowed = allowed_from(STEP_TRANSITIONS, to)
    sources = [s for s in allowed if from_ is None or s in set(from_)]
    sql, params = _statement(table="executions_step", kind="step", to=to, sources=sources, source=source,
                             sets=sets or {}, fenced=fenced, skip_locked=skip_locked, returning=returning,
                             message=message)
    return _fetch(cursor, sql, params)


def move_executions(cursor: Any, to: str, source: Source, *, sets: dict[str, str] | None = None,
                    from_: Iterable[str] | None = None, message: str | None = None) -> list[dict[str, Any]]:
    """Move executions to ``to`` and keep fan-out counts, merge wake-ups and redrive in step."""
    allowed = allowed_from(EXECUTION_TRANSITIONS, to)
    sources = [s for s in allowed if from_ is None or s in set(from_)]
    sql, params = _statement(table="executions_execution", kind="execution", to=to, sources=sources,
                             source=source, sets=sets or {}, fenced=False, skip_locked=False,
                             returning=("s.spawned_by_id", "s.parent_id", "s.status"), message=message)
    moved = _fetch(cursor, sql, params)
    _propagate_to_fanouts(cursor, moved)
    return moved


# --- fan-out bookkeeping ---------------------------------------------------------------------

_COUNTER = {E.SUCCEEDED: 0, E.FAILED: 1, E.CANCELLED: 2}

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
    RETURNING f.step_id, f.execution_id, f.merge_vertex, d.reopened > 0 AS reopened, {FANOUT_DECIDED} AS decided
"""  # noqa: S608 - constant SQL fragments and fixed column names only

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
    with_merge = [f for f in fanouts if f["merge_vertex"]]
    _reopen_merges(cursor, [f for f in with_merge if f["reopened"]])
    _wake_merges(cursor, [f for f in with_merge if f["decided"]])


def _merge_source(fanouts: list[dict[str, Any]]) -> Source:
    return Source(_MERGE_STEPS, {
        "executions": [f["execution_id"] for f in fanouts],
        "vertices": [f["merge_vertex"] for f in fanouts],
    })


def _wake_merges(cursor: Any, fanouts: list[dict[str, Any]]) -> None:
    if fanouts and move_steps(cursor, S.READY, _merge_source(fanouts), from_=[S.WAITING],
                              sets={"due_at": "now()", "wait_reason": "''"}, message="children decided the merge"):
        from executions import kick

        kick.work_created(cursor)


def _reopen_merges(cursor: Any, fanouts: list[dict[str, Any]]) -> None:
    """Redrive: a merge that failed re-opens when one of its children is retried, and its
    execution goes back from FAILED to RUNNING (which may re-open the grandparent's)."""
    if not fanouts:
        return
    reopened = move_steps(cursor, S.WAITING, _merge_source(fanouts), from_=[S.FAILED],
                          sets={"error": "''", "attempt": "s.attempt + 1",
                                "max_attempts": "greatest(s.max_attempts, s.attempt + 1)",
                                "wait_reason": "'waiting for children'"},
                          message="re-opened: a child was retried (redrive)")
    if reopened:
        move_executions(cursor, E.RUNNING, ids({row["execution_id"] for row in reopened}, "uuid"),
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
