"""The engine core: turn claimed steps into runs, run their vertices, and commit outcomes.

The core knows nothing of vertex kinds: ``executions.engine.vertices`` dispatches to the module
of a vertex's kind. Commits are set-based — one statement per kind of transition for a whole batch —
and fenced: only steps still leased to this worker move (S5).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from executions.core import calls as call_log
from executions.core import leases, payloads, records, retry, state, waits
from executions.core.leases import ClaimedStep
from executions.core.outcomes import NO_OUTPUT, Outcome, failed
from executions.core.runs import ExecutionInfo, LeaseLost, StepRun
from executions.core.versions import LoadedVersion, load_versions
from executions.engine import vertices
from executions.handlers import NonRetryable
from executions.models import ExecutionStatus, StepStatus
from executions.platform import metrics, notify
from workflows import sudo
from workflows.dsl import ast
from workflows.dsl.paths import PathNotFound

log = logging.getLogger(__name__)
E, S = ExecutionStatus, StepStatus


# Where a step's destination comes from (its id was resolved when the step was created).
DESTINATIONS = """
    SELECT id, name, base_url, timeout_seconds FROM executions_destination WHERE id = ANY(%(ids)s)
"""
EXECUTIONS = """
    SELECT id, workspace_id, workflow_id, version_id, parent_id, root_id, depth, item_index, spawned_by_id,
           tags::text AS tags
    FROM executions_execution WHERE id = ANY(%(ids)s)
"""


# --- loading ----------------------------------------------------------------------------------

_needs: dict[tuple[int, str], frozenset[str]] = {}


def needs(version: LoadedVersion, vertex: ast.Vertex) -> frozenset[str]:
    """The payloads a vertex reads, worked out once per version and vertex (both immutable)
    rather than once per claimed step."""
    key = (version.id, vertex.id)
    if key not in _needs:
        _needs[key] = frozenset(vertices.needs(vertex))
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
    destinations = call_log.for_calls(cursor, [c.destination_id for c in claimed if c.destination_id])
    runs, wanted = [], []
    for step in claimed:
        execution = executions[step.execution_id]
        version = versions[execution.version_id]
        vertex = version.workflow.vertices[step.vertex]
        run = StepRun(step, execution, version, vertex, {"input": None, "steps": {}},
                      destinations.get(step.destination_id) if step.destination_id else None, commit_in_fence)
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
        _check_destination(run)
        outcome = vertices.run(run)
        prepare_output(run, outcome)
        return outcome
    except Exception as error:
        return _failure(run, error)


def runs_async(run: StepRun) -> bool:
    """Whether the step runs on the drain's event loop (``execute_async``), not a thread."""
    return vertices.runs_async(run)


async def execute_async(run: StepRun) -> Outcome:
    """``execute`` on the drain's event loop (HTTP steps, async handlers); never raises."""
    try:
        _check_destination(run)
        outcome = await vertices.run_async(run)
        prepare_output(run, outcome)
        return outcome
    except Exception as error:
        return _failure(run, error)


def _check_destination(run: StepRun) -> None:
    """S15: a reserved workflow calls reserved destinations only (raises ReservedKeyDenied)."""
    if run.destination is not None:
        sudo.check_reserved_dependency(run.version.key, destination=run.destination["name"])


def _failure(run: StepRun, error: Exception) -> Outcome:
    """The outcome of a step whose vertex raised (LeaseLost is re-raised: nothing to record)."""
    if isinstance(error, LeaseLost):
        raise error
    if isinstance(error, sudo.ReservedKeyDenied):
        return failed(error.message, retryable=False)
    if isinstance(error, NonRetryable):
        return failed(str(error) or type(error).__name__, retryable=False)
    if isinstance(error, PathNotFound):
        return failed(str(error), retryable=False)
    if isinstance(error, payloads.PayloadError):
        return failed(f"output {error}", retryable=False)
    # A handler raising is an ordinary, retryable step failure, recorded on the step.
    log.info("step %s (%s) raised %s: %s", run.step_id, run.vertex.id, type(error).__name__, error,
             exc_info=log.isEnabledFor(logging.DEBUG))
    return failed(f"{type(error).__name__}: {error}")


def prepare_output(run: StepRun, outcome: Outcome) -> None:
    """Serialise the output where the step ran, so a bad output fails only its own step."""
    if outcome.kind == "succeeded" and outcome.output is not NO_OUTPUT and outcome.output is not None:
        run.output_text = payloads.encode(outcome.output)


# --- committing -------------------------------------------------------------------------------

def create_steps(cursor: Any, entries: Sequence[tuple[ExecutionInfo, ast.Vertex, str | None]]) -> None:
    """Create READY steps for ``(execution, vertex, prev_vertex)``; a step that exists
    already (a redelivered result) is left alone."""
    records.insert_steps(cursor, [
        records.NewStep(execution.id, execution.workspace_id, vertex.id, retry.max_attempts(vertex), prev,
                        getattr(vertex, "destination_name", None))
        for execution, vertex, prev in entries
    ])


def commit_in_fence(cursor: Any, results: Sequence[tuple[StepRun, Outcome]]) -> None:
    """Commit outcomes inside a vertex's fenced transaction (runs.FencedTransaction)."""
    for run, outcome in results:
        prepare_output(run, outcome)
    commit(cursor, results, fenced=False)


def commit(cursor: Any, results: Sequence[tuple[StepRun, Outcome]], *, fenced: bool = True,
           counts: state.FanoutCounts | None = None) -> list[StepRun]:
    """Apply outcomes as transitions; returns the runs whose result was stale (discarded).

    The steps still leased to this worker are fenced first (leases.fence); only they move.
    ``fenced=False`` is for a vertex committing inside its own fenced transaction, where the
    lease was verified (and the row locked) already. ``counts``: the fan-out counts of the
    executions that move go there, for the caller to apply last (state.FanoutCounts);
    without it they are applied with each transition.
    """
    results = [(r, o) for r, o in results if o.kind != "committed"]
    if not results:
        return []
    if fenced:
        ours = leases.fence(cursor, [run.claimed.lease for run, _ in results])
        stale = [run for run, _ in results if run.step_id not in ours]
        results = [(r, o) for r, o in results if r.step_id in ours]
    else:
        stale = []
    groups: dict[str, list[tuple[StepRun, Outcome]]] = {}
    for run, outcome in results:
        key = outcome.kind
        if key == "failed":
            # The step's own budget: an operator retry gives it a new round (S16).
            key = "retry" if outcome.retryable and run.attempt < run.claimed.max_attempts else "failed"
        groups.setdefault(key, []).append((run, outcome))
    moved = _apply(cursor, groups)
    metrics.steps_committed(groups, moved)
    # A step back to waiting (a retry backoff, a timer, a merge) means its execution has started.
    start_executions(cursor, [r for key in ("retry", "wait", "signal", "await") for r, _ in groups.get(key, [])
                              if r.step_id in moved], counts=counts)
    stale += [run for run, _ in results if run.step_id not in moved]
    if stale:
        note_fenced(cursor, stale, "discarded a late result: this worker's lease was no longer current (fenced)")
    _after_success(cursor, [(r, o) for r, o in groups.get("succeeded", []) if r.step_id in moved], counts)
    fail_executions(cursor, [(r.execution.id, r.vertex.id, o.error, r.claimed.claimed_at)
                             for r, o in groups.get("failed", []) if r.step_id in moved], counts=counts)
    return stale


def _apply(cursor: Any, groups: dict[str, list[tuple[StepRun, Outcome]]]) -> set[int]:
    """One named transition per kind of outcome, for the whole batch; the ids that moved."""
    moved: set[int] = set()
    if done := groups.get("succeeded"):
        moved |= state.succeed_steps(cursor, [r.step_id for r, _ in done])
    if again := groups.get("retry"):
        moved |= state.retry_steps_later(
            cursor, [r.step_id for r, _ in again], errors=[o.error for _, o in again],
            delays=[retry.delay(r.vertex, r.attempt, r.claimed.max_attempts) for r, _ in again],
            messages=[f"attempt {r.attempt} failed: {o.error}" for r, o in again])
    if failed_ := groups.get("failed"):
        moved |= state.fail_steps(cursor, [r.step_id for r, _ in failed_], errors=[o.error for _, o in failed_])
    if waiting := groups.get("wait"):
        moved |= state.wait_steps(
            cursor, [r.step_id for r, _ in waiting], due_at=[o.due_at for _, o in waiting],
            due_in=[o.due_in for _, o in waiting], reasons=[o.reason for _, o in waiting],
            states=[_json(o.state) for _, o in waiting], throttled=[o.throttled for _, o in waiting])
    if awaited := groups.get("await"):
        moved |= _await(cursor, awaited)
    if signalled := groups.get("signal"):
        moved |= state.signal_steps(cursor, [r.step_id for r, _ in signalled],
                                    reasons=[o.reason for _, o in signalled],
                                    states=[_json(o.state) for _, o in signalled])
    return moved


def _await(cursor: Any, awaited: list[tuple[StepRun, Outcome]]) -> set[int]:
    """RUNNING → WAITING for the outside world, registering the waits of the batch in one
    statement first (core/waits.py); a wait whose answer is there already (an event within
    its lookback) is resumed at once: its vertex finishes with it when it runs again."""
    registered = waits.register(cursor, [o.wait for _, o in awaited if o.wait is not None])
    moved = state.await_steps(
        cursor, [r.step_id for r, _ in awaited], reasons=[o.reason for _, o in awaited],
        due_at=[o.due_at if o.wait is None else registered[r.step_id].due_at for r, o in awaited])
    answered = [found.wait_id for step_id, found in registered.items() if found.completion is not None
                and step_id in moved]
    state.resume_completed_waits(cursor, answered, message="the event had been delivered already (lookback)")
    return moved


def _json(value: Any) -> str | None:
    return None if value is None else payloads.encode(value)


def note_fenced(cursor: Any, stale: Sequence[StepRun], message: str) -> None:
    """Record in each step's history that a stale worker's result was discarded (S5)."""
    metrics.results_fenced(len(stale))
    for run in stale:
        log.warning("discarded a result for step %s (%s/%s, attempt %s): lease no longer held",
                    run.step_id, run.execution.id, run.vertex.id, run.attempt)
    state.note(cursor, [(r.execution.id, r.step_id, r.vertex.id, r.attempt, message) for r in stale])


def _after_success(cursor: Any, results: list[tuple[StepRun, Outcome]], counts: state.FanoutCounts | None) -> None:
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
    start_executions(cursor, moving_on, counts=counts)
    succeeded = [(r, o) for r, o in ending if (o.end or E.SUCCEEDED) == E.SUCCEEDED]
    state.succeed_executions(cursor, [r.execution.id for r, _ in succeeded],
                             output_vertices=[o.output_vertex or r.vertex.id for r, o in succeeded],
                             started=[r.claimed.claimed_at for r, _ in succeeded], counts=counts)
    fail_executions(cursor, [(r.execution.id, r.vertex.id, o.error, r.claimed.claimed_at) for r, o in ending
                             if o.end == E.FAILED], prefix=False, counts=counts)


def start_executions(cursor: Any, runs: Sequence[StepRun], *, counts: state.FanoutCounts | None = None) -> None:
    """PENDING → RUNNING for executions that visibly run: their step went on to another, or
    back to waiting, or has been running for a while (executions/worker/housekeeping.py). A claim does not do it, so
    a child whose only step finishes at once goes PENDING → SUCCEEDED in one update."""
    pending = {run.execution.id: run.claimed.claimed_at for run in runs}
    state.run_executions(cursor, list(pending), started=list(pending.values()), counts=counts)


def fail_executions(cursor: Any, entries: Sequence[tuple[Any, str, str, Any]], *, prefix: bool = True,
                    counts: state.FanoutCounts | None = None) -> None:
    """Fail the executions of steps that failed for good: ``(execution_id, vertex, error,
    claimed_at or None)``."""
    errors = [f"step '{vertex}' failed: {error}" if prefix else error for _, vertex, error, _ in entries]
    state.fail_executions(cursor, [e[0] for e in entries], errors=errors, started=[e[3] for e in entries],
                          counts=counts)


def reap(limit: int = 1000) -> tuple[int, int]:
    """Run the reaper once (its own transaction), and time out the waits past their
    deadline (core/waits.py); returns (re-queued, failed)."""
    with transaction.atomic(), connection.cursor() as cursor:
        requeued, failed_rows = leases.reap(cursor, limit)
        waits.sweep(cursor, limit)  # a timed-out wait's step is READY now (its statement wakes a drain)
        metrics.reaped(len(requeued), len(failed_rows))
        fail_executions(cursor, [(row["execution_id"], row["vertex"], row["error"], None) for row in failed_rows])
        if requeued:
            notify.work_created(cursor)
    return len(requeued), len(failed_rows)
