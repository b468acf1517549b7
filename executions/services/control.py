"""Writes of operators steering running work (issue 31): pause and resume an execution tree
or a workspace (S24), edit a running fan-out (S25). The API, the UI and ``sb_run`` call these;
the callers audit them (the API's ``acting``, the UI's actions).

Pause and resume are idempotent: a second pause keeps the first one's time and author, a
resume of what is not paused changes nothing; either returns whether it changed anything.
A paused execution can still be cancelled (cancel is total, S18); pausing a finished one is
a Conflict (409)."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from executions.core import pauses, state
from executions.fanout import edits
from executions.models import Execution
from executions.platform import transient
from executions.services.lifecycle import _guard
from workflows import sudo
from workflows.errors import Conflict, Invalid, NotFound
from workflows.models import Workspace


def pause_execution(execution: Execution, *, actor: str = "", system_actor: sudo.VerifiedActor | None = None) -> bool:
    """Pause ``execution`` and its whole subtree: from the return on, none of its steps is claimed."""
    _guard(execution, system_actor, "pausing executions of")

    def pause() -> bool:
        with transaction.atomic(), connection.cursor() as cursor:
            current = Execution.objects.get(pk=execution.pk)
            if current.is_terminal:
                raise Conflict(f"execution is already {current.status}: there is nothing to pause")
            changed = pauses.pause_execution(cursor, current.pk, current.root_id or current.pk, actor)
            if changed:
                state.note(cursor, [(current.pk, None, "", None, f"paused by {actor or 'someone'}")])
            return changed
    return transient.retrying(pause)


def resume_execution(execution: Execution, *, actor: str = "", system_actor: sudo.VerifiedActor | None = None) -> bool:
    """Resume it: its due steps are claimed again, timers and backoffs at their own due times."""
    _guard(execution, system_actor, "resuming executions of")
    with transaction.atomic(), connection.cursor() as cursor:
        changed = pauses.resume_execution(cursor, execution.pk)
        if changed:
            state.note(cursor, [(execution.pk, None, "", None, f"resumed by {actor or 'someone'}")])
    return changed


def pause_workspace(workspace: Workspace, *, actor: str = "") -> bool:
    """Pause every execution of the workspace (new ones may start: they wait)."""
    with transaction.atomic(), connection.cursor() as cursor:
        return pauses.pause_workspace(cursor, workspace.pk, actor)


def resume_workspace(workspace: Workspace) -> bool:
    with transaction.atomic(), connection.cursor() as cursor:
        return pauses.resume_workspace(cursor, workspace.pk)


def edit_fanout(execution: Execution, vertex: str, *, actor: str = "", system_actor: sudo.VerifiedActor | None = None,
                **fields: Any) -> dict[str, list[Any]]:
    """Override a running fan-out's ``max_concurrency`` (int ≥ 1 or None) and/or its failure
    tolerance (``max_failure_ratio`` 0–1, ``max_failures`` int ≥ 0 or None); returns the changes."""
    _guard(execution, system_actor, "editing executions of")
    if not fields:
        raise Invalid("give maxConcurrency and/or failureTolerance")

    def apply() -> dict[str, list[Any]]:
        with transaction.atomic(), connection.cursor() as cursor:
            current = Execution.objects.get(pk=execution.pk)
            if current.is_terminal:
                raise Conflict(f"execution is already {current.status}: its fan-outs cannot change")
            try:
                _, changes = edits.edit(cursor, execution.pk, vertex, actor=actor, **fields)
            except edits.FanOutNotFound as error:
                raise NotFound(f"no fan-out '{vertex}' in execution {execution.pk} (has its spawner run?)") from error
            except edits.QuorumTolerance as error:
                raise Conflict(f"fan-out '{vertex}' joins a quorum merge (minSuccessful {error.args[0]}): its failure "
                               "tolerance is the quorum's and cannot be edited; maxConcurrency can") from error
            return changes
    return transient.retrying(apply)
