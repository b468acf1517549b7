"""The engine core: turn claimed steps into runs, run their vertices, and commit outcomes.

The core knows nothing of vertex kinds: it looks a kind up in ``executions.vertices`` and
calls it. Commits are set-based — one statement per kind of transition for a whole batch —
and fenced: only steps still leased to this worker move (S5).
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from executions import destinations as destination_rows
from executions import kick, leases, payloads, state, vertices
from executions.handlers import NonRetryable
from executions.leases import ClaimedStep
from executions.models import ExecutionStatus, StepStatus
from executions.outcomes import NO_OUTPUT, Outcome, failed
from workflows import dsl
from workflows.dsl import ast
from workflows.dsl.paths import PathNotFound

log = logging.getLogger(__name__)
E, S = ExecutionStatus, StepStatus


class LeaseLost(Exception):
    """The step is no longer leased to this worker (expired, cancelled, or re-run)."""


# --- loading ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedVersion:
    id: int
    definition_id: int
    hash: str
    workflow: dsl.Workflow


_versions: dict[int, LoadedVersion] = {}

EXECUTIONS = """
    SELECT id, workspace_id, workflow_id, version_id, parent_id, root_id, depth, item_index, spawned_by_id
    FROM executions_execution WHERE id = ANY(%(ids)s)
"""
VERSIONS = "SELECT id, definition_id, hash, dsl FROM workflows_workflowversion WHERE id = ANY(%(ids)s)"


def load_version(cursor: Any, version_id: int) -> LoadedVersion:
    return load_versions(cursor, [version_id])[version_id]


def load_versions(cursor: Any, version_ids: Sequence[int]) -> dict[int, LoadedVersion]:
    """Versions are immutable, so a parsed version is cached for the life of the process."""
    missing = [vid for vid in set(version_ids) if vid not in _versions]
    if missing:
        cursor.execute(VERSIONS, {"ids": missing})
        for vid, definition_id, digest, doc in cursor.fetchall():
            _versions[vid] = LoadedVersion(vid, definition_id, digest, dsl.parse(payloads.decode(doc)))
    return {vid: _versions[vid] for vid in version_ids}


@dataclass
class ExecutionInfo:
    id: uuid.UUID
    workspace_id: int
    workflow_id: int
    version_id: int
    parent_id: uuid.UUID | None
    root_id: uuid.UUID | None
    depth: int
    item_index: int | None
    spawned_by_id: int | None


@dataclass
class StepRun:
    """A claimed step as its vertex sees it."""

    claimed: ClaimedStep
    execution: ExecutionInfo
    version: LoadedVersion
    vertex: ast.Vertex
    context: dict[str, Any]
    destination: dict[str, Any] | None
    output_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Set when its vertex moves the step out of RUNNING in its own fenced transaction: the
    # lease then ends with a result, not lost (the drain's heartbeat must not take it so).
    finished_itself: bool = False

    @property
    def step_id(self) -> int:
        return self.claimed.step_id

    @property
    def attempt(self) -> int:
        return self.claimed.attempt

    @property
    def state(self) -> dict[str, Any]:
        return self.claimed.state

    @property
    def db_now(self) -> datetime:
        return self.claimed.claimed_at

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts and redeliveries: forward it to destinations (S5)."""
        return f"sb:{self.execution.id}:{self.vertex.id}"

    @contextlib.contextmanager
    def transaction(self, prelock: tuple[str, dict[str, Any]] | None = None) -> Iterator[FencedTransaction]:
        """A transaction in which this step is verified to still be ours (raises LeaseLost
        otherwise) and its lease is renewed. ``prelock`` runs first, for rows that the lock
        order puts before a step (a MERGE locks its fan-out row)."""
        with transaction.atomic(), connection.cursor() as cursor:
            if prelock:
                cursor.execute(*prelock)
            cursor.execute(FENCE, {"id": self.step_id, "token": self.claimed.lease_token,
                                   "lease": leases.lease_seconds()})
            if cursor.fetchone() is None:
                raise LeaseLost(f"step {self.step_id} is no longer leased to this worker")
            yield FencedTransaction(cursor, self)


FENCE = """
    UPDATE executions_step SET lease_expires_at = now() + make_interval(secs => %(lease)s)
    WHERE id = %(id)s AND lease_token = %(token)s AND status = 'RUNNING'
    RETURNING id
"""


@dataclass
class FencedTransaction:
    cursor: Any
    run: StepRun
    finished: bool = False

    def finish(self, outcome: Outcome) -> None:
        """Commit the step's outcome inside this transaction (the vertex then returns
        ``outcomes.committed()``)."""
        prepare_output(self.run, outcome)
        commit(self.cursor, [(self.run, outcome)], fenced=False)
        self.finished = self.run.finished_itself = True


_needs: dict[tuple[int, str], frozenset[str]] = {}


def needs(version: LoadedVersion, vertex: ast.Vertex) -> frozenset[str]:
    """The payloads a vertex reads, worked out once per version and vertex (both immutable)
    rather than once per claimed step."""
    key = (version.id, vertex.id)
    if key not in _needs:
        _needs[key] = frozenset(vertices.kind(vertex).needs(vertex))
    return _needs[key]


def load_runs(cursor: Any, claimed: Sequence[ClaimedStep]) -> list[StepRun]:
    """Build runs for claimed steps: their execution, pinned version, vertex, destination,
    and the payloads their vertex reads (only those: a spawner never loads its list)."""
    if not claimed:
        return []
    cursor.execute(EXECUTIONS, {"ids": list({c.execution_id for c in claimed})})
    names = [column.name for column in cursor.description]
    executions = {row[0]: ExecutionInfo(**dict(zip(names, row, strict=True))) for row in cursor.fetchall()}
    versions = load_versions(cursor, [e.version_id for e in executions.values()])
    destinations = destination_rows.for_calls(cursor, [c.destination_id for c in claimed if c.destination_id])
    runs, wanted = [], []
    for step in claimed:
        execution = executions[step.execution_id]
        version = versions[execution.version_id]
        vertex = version.workflow.vertices[step.vertex]
        run = StepRun(step, execution, version, vertex, {"input": None, "steps": {}},
                      destinations.get(step.destination_id) if step.destination_id else None)
        runs.append(run)
        wanted += [(execution.id, name) for name in needs(version, vertex)]
    values = payloads.load(cursor, wanted)
    for run in runs:
        for name in needs(run.version, run.vertex):
            if (run.execution.id, name) not in values:
                continue
            value = values[(run.execution.id, name)]
            if name == payloads.INPUT:
                run.context["input"] = value
            else:
                run.context["steps"][name] = {"output": value}
    return runs


# --- running ----------------------------------------------------------------------------------

def execute(run: StepRun) -> Outcome:
    """Run one step's vertex; never raises (an exception becomes a failed outcome)."""
    try:
        outcome = vertices.kind(run.vertex).run(run)
        prepare_output(run, outcome)
        return outcome
    except LeaseLost:
        raise
    except NonRetryable as error:
        return failed(str(error) or type(error).__name__, retryable=False)
    except PathNotFound as error:
        return failed(str(error), retryable=False)
    except payloads.PayloadError as error:
        return failed(f"output {error}", retryable=False)
    except Exception as error:
        # A handler raising is an ordinary, retryable step failure, recorded on the step.
        log.info("step %s (%s) raised %s: %s", run.step_id, run.vertex.id, type(error).__name__, error,
                 exc_info=log.isEnabledFor(logging.DEBUG))
        return failed(f"{type(error).__name__}: {error}")


def prepare_output(run: StepRun, outcome: Outcome) -> None:
    """Serialise the output where the step ran, so a bad output fails only its own step."""
    if outcome.kind == "succeeded" and outcome.output is not NO_OUTPUT and outcome.output is not None:
        run.output_text = payloads.encode(outcome.output)


# --- committing -------------------------------------------------------------------------------

INSERT_STEPS = """
    INSERT INTO executions_step (execution_id, vertex, prev_vertex, attempt, max_attempts, due_at, wait_reason,
                                 destination_id, lease_expiries, state, error, created_at)
    SELECT n.execution_id, n.vertex, n.prev_vertex, 1, n.max_attempts, now(), '', d.id, 0, '{}'::jsonb, '', now()
    FROM unnest(%(executions)s::uuid[], %(vertices)s::varchar[], %(prevs)s::varchar[], %(max_attempts)s::int[],
                %(workspaces)s::bigint[], %(destinations)s::varchar[])
         AS n(execution_id, vertex, prev_vertex, max_attempts, workspace_id, destination)
    LEFT JOIN executions_destination d ON d.workspace_id = n.workspace_id AND d.name = n.destination
    ON CONFLICT (execution_id, vertex) DO NOTHING
"""


# Vertices without a retry policy (MERGE, TIMER, CHOICE, SUCCEED, FAIL) run no user code and
# are safe to run again; they lose their worker like any step (kill -9, a database restart)
# and must not fail their execution for it. The bound still ends one that crashes every time.
INTERNAL_MAX_ATTEMPTS = 5


def max_attempts(vertex: ast.Vertex) -> int:
    return vertex.retry.max_attempts if isinstance(vertex, ast.WorkVertex) else INTERNAL_MAX_ATTEMPTS


def create_steps(cursor: Any, entries: Sequence[tuple[ExecutionInfo, ast.Vertex, str | None]]) -> None:
    """Create READY steps for ``(execution, vertex, prev_vertex)``; a step that exists
    already (a redelivered result) is left alone."""
    if not entries:
        return
    cursor.execute(INSERT_STEPS, {
        "executions": [e[0].id for e in entries],
        "vertices": [e[1].id for e in entries],
        "prevs": [e[2] for e in entries],
        "max_attempts": [max_attempts(e[1]) for e in entries],
        "workspaces": [e[0].workspace_id for e in entries],
        "destinations": [getattr(e[1], "destination_name", None) for e in entries],
    })
    kick.work_created(cursor)


def _fenced_rows(results: Sequence[tuple[StepRun, Outcome]], **columns: tuple[str, Any]) -> state.Source:
    spec: dict[str, tuple[str, Sequence[Any]]] = {"lease_token": ("uuid", [r.claimed.lease_token for r, _ in results])}
    for name, (sql_type, getter) in columns.items():
        spec[name] = (sql_type, [getter(r, o) for r, o in results])
    return state.rows(spec, id_values=[r.step_id for r, _ in results])


def _retry_delay(run: StepRun) -> float:
    vertex = run.vertex
    if not isinstance(vertex, ast.WorkVertex):
        return 0.0
    return vertex.retry.delay(run.attempt, random.random())  # noqa: S311 - jitter, not security


def commit(cursor: Any, results: Sequence[tuple[StepRun, Outcome]], *, fenced: bool = True) -> list[StepRun]:
    """Apply outcomes as transitions; returns the runs whose result was stale (discarded).

    ``fenced=False`` is for a vertex committing inside its own FencedTransaction, where the
    lease was verified (and the row locked) already.
    """
    results = [(r, o) for r, o in results if o.kind != "committed"]
    if not results:
        return []
    groups: dict[str, list[tuple[StepRun, Outcome]]] = {}
    for run, outcome in results:
        key = outcome.kind
        if key == "failed":
            key = "retry" if outcome.retryable and run.attempt < max_attempts(run.vertex) else "failed"
        groups.setdefault(key, []).append((run, outcome))
    moved: set[int] = set()
    moved |= _move(cursor, S.SUCCEEDED, groups.get("succeeded", []), fenced, {})
    retry = groups.get("retry", [])
    moved |= _move(cursor, S.READY, retry, fenced, {
        "attempt": "s.attempt + 1", "error": "src.error", "wait_reason": "src.reason",
        "due_at": "now() + make_interval(secs => src.due_in)",
    }, error=("text", lambda r, o: o.error), reason=("text", lambda r, o: f"retry backoff after: {o.error}"[:300]),
        due_in=("float8", lambda r, o: _retry_delay(r)),
        message=("text", lambda r, o: f"attempt {r.attempt} failed: {o.error}"))
    moved |= _move(cursor, S.FAILED, groups.get("failed", []), fenced, {"error": "src.error"},
                   error=("text", lambda r, o: o.error), message=("text", lambda r, o: o.error))
    moved |= _move(cursor, S.READY, groups.get("wait", []), fenced, {
        "due_at": "coalesce(src.due_at, now() + make_interval(secs => coalesce(src.due_in, 0)))",
        "wait_reason": "src.reason", "state": "coalesce(src.state, s.state)",
    }, due_at=("timestamptz", lambda r, o: o.due_at), due_in=("float8", lambda r, o: o.due_in),
        reason=("text", lambda r, o: o.reason[:300]), state=("jsonb", lambda r, o: _json(o.state)),
        message=("text", lambda r, o: o.reason))
    moved |= _move(cursor, S.WAITING, groups.get("signal", []), fenced, {
        "wait_reason": "src.reason", "state": "coalesce(src.state, s.state)",
    }, reason=("text", lambda r, o: o.reason[:300]), state=("jsonb", lambda r, o: _json(o.state)),
        message=("text", lambda r, o: o.reason))
    # A step back to waiting (a retry backoff, a timer, a merge) means its execution has started.
    start_executions(cursor, [r for key in ("retry", "wait", "signal") for r, _ in groups.get(key, [])
                              if r.step_id in moved])
    stale = [run for run, _ in results if run.step_id not in moved]
    if stale:
        note_fenced(cursor, stale, "discarded a late result: this worker's lease was no longer current (fenced)")
    _after_success(cursor, [(r, o) for r, o in groups.get("succeeded", []) if r.step_id in moved])
    fail_executions(cursor, [(r.execution.id, r.vertex.id, o.error, r.claimed.claimed_at)
                             for r, o in groups.get("failed", []) if r.step_id in moved])
    return stale


def _json(value: Any) -> str | None:
    return None if value is None else payloads.encode(value)


def _move(cursor: Any, to: str, results: list[tuple[StepRun, Outcome]], fenced: bool, sets: dict[str, str],
          **columns: tuple[str, Any]) -> set[int]:
    if not results:
        return set()
    source = _fenced_rows(results, **columns)
    rows = state.move_steps(cursor, to, source, from_=[S.RUNNING], fenced=fenced, sets=sets)
    return {row["id"] for row in rows}


def note_fenced(cursor: Any, stale: Sequence[StepRun], message: str) -> None:
    """Record in each step's history that a stale worker's result was discarded (S5)."""
    for run in stale:
        log.warning("discarded a result for step %s (%s/%s, attempt %s): lease no longer held",
                    run.step_id, run.execution.id, run.vertex.id, run.attempt)
    state.note(cursor, [(r.execution.id, r.step_id, r.vertex.id, r.attempt, message) for r in stale])


def _after_success(cursor: Any, results: list[tuple[StepRun, Outcome]]) -> None:
    payloads.put_many(cursor, [(r.execution.id, r.vertex.id, r.output_text) for r, _ in results
                               if r.output_text is not None])
    continuing, moving_on, ending = [], [], []
    for run, outcome in results:
        target = None if outcome.end else (outcome.next or run.vertex.next)
        if target:
            continuing.append((run.execution, run.version.workflow.vertices[target], run.vertex.id))
            moving_on.append(run)
        else:
            ending.append((run, outcome))
    create_steps(cursor, continuing)
    start_executions(cursor, moving_on)
    succeeded = [(r, o) for r, o in ending if (o.end or E.SUCCEEDED) == E.SUCCEEDED]
    if succeeded:
        state.move_executions(cursor, E.SUCCEEDED, state.rows({
            "output_vertex": ("varchar", [o.output_vertex or r.vertex.id for r, o in succeeded]),
            "started": ("timestamptz", [r.claimed.claimed_at for r, _ in succeeded]),
        }, "uuid", id_values=[r.execution.id for r, _ in succeeded]),
            from_=[E.PENDING, E.RUNNING],
            sets={"output_vertex": "src.output_vertex", "error": "''", "started_at": STARTED_AT})
    fail_executions(cursor, [(r.execution.id, r.vertex.id, o.error, r.claimed.claimed_at) for r, o in ending
                             if o.end == E.FAILED], prefix=False)


# An execution that finishes straight from PENDING ran from its first step's claim.
STARTED_AT = "coalesce(s.started_at, src.started, now())"


def start_executions(cursor: Any, runs: Sequence[StepRun]) -> None:
    """PENDING → RUNNING for executions that visibly run: their step went on to another, or
    back to waiting, or has been running for a while (worker.py). A claim does not do it, so
    a child whose only step finishes at once goes PENDING → SUCCEEDED in one update."""
    pending = {run.execution.id: run.claimed.claimed_at for run in runs}
    if pending:
        state.move_executions(cursor, E.RUNNING, state.rows({"started": ("timestamptz", list(pending.values()))},
                                                            "uuid", id_values=list(pending)),
                              from_=[E.PENDING], sets={"started_at": STARTED_AT})


def fail_executions(cursor: Any, entries: Sequence[tuple[Any, str, str, Any]], *, prefix: bool = True) -> None:
    """Fail the executions of steps that failed for good: ``(execution_id, vertex, error,
    claimed_at or None)``."""
    if not entries:
        return
    errors = [f"step '{vertex}' failed: {error}" if prefix else error for _, vertex, error, _ in entries]
    state.move_executions(cursor, E.FAILED, state.rows({"error": ("text", errors), "message": ("text", errors),
                                                        "started": ("timestamptz", [e[3] for e in entries])},
                                                       "uuid", id_values=[e[0] for e in entries]),
                          from_=[E.PENDING, E.RUNNING], sets={"error": "src.error", "started_at": STARTED_AT})


def reap(limit: int = 1000) -> tuple[int, int]:
    """Run the reaper once (its own transaction); returns (re-queued, failed)."""
    with transaction.atomic(), connection.cursor() as cursor:
        requeued, failed_rows = leases.reap(cursor, limit)
        fail_executions(cursor, [(row["execution_id"], row["vertex"], row["error"], None) for row in failed_rows])
        if requeued:
            kick.work_created(cursor)
    return len(requeued), len(failed_rows)
