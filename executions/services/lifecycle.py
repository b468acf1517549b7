"""Writes: starting, cancelling and retrying executions (the UI, the API, commands and the
CHAIN vertex all call these; none has powers the others lack).

Each service is one transaction that follows the lock order in state.py, and raises a
``ServiceError`` (mapped to a 4xx) for what makes no sense, leaving nothing half-written.

Reserved workflows (S15): starting, cancelling and retrying executions of a reserved key
needs ``system_actor``, a verified system actor covering it (``workflows.sudo``); callers
that pass none (the UI, commands) are refused with ``ReservedKeyDenied``. A CHAIN may start
a reserved workflow only from an execution of a reserved workflow.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import OperationalError, connection, transaction

from executions import selectors
from executions.core import cancel, payloads, priorities, retention, retry, starts, state, versions
from executions.fanout import recovery
from executions.models import Execution, ExecutionStatus, FanOut, Step, StepStatus
from executions.platform import notify, transient
from executions.services import uploads
from workflows import sudo
from workflows import tags as tag_rules
from workflows.errors import Conflict, Invalid, NotFound
from workflows.models import Workspace

E, S = ExecutionStatus, StepStatus



IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")


@dataclass(frozen=True)
class Started:
    execution: Execution
    created: bool


def _guard(execution: Execution, system_actor: sudo.VerifiedActor | None, doing: str) -> None:
    """Refuse ``doing`` an execution of a reserved workflow, or one in a reserved workflow's
    tree (its root's workflow), without a system actor covering both keys."""
    own, root = (Execution.objects.filter(pk=execution.pk)
                 .values_list("workflow__key", "root__workflow__key").get())
    for key in dict.fromkeys([own, root or own]):
        sudo.require(key, system_actor, doing)


guard = _guard  # the same check for a bulk operation (services/bulk.py)


def start_execution(workspace: Workspace, *, input: Any, workflow: str | None = None,
                    version: str | None = None, idempotency_key: str | None = None,
                    created_by: str = "", system_actor: sudo.VerifiedActor | None = None,
                    tags: Any = None, priority: int | None = None) -> Started:
    """Start an execution of ``workflow`` (its current version) or of version ``version``,
    with ``tags`` (string pairs, workflows/tags.py) that every descendant inherits, at
    ``priority`` (1 first to 5; None: the default, 3)."""
    if workflow is None and version is None:
        raise Invalid("give a workflow key or a version hash")
    if priority is not None:
        _check_priority(priority)
    if idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise Invalid("an idempotency key is 1 to 255 printable ASCII characters")
    if idempotency_key is not None and idempotency_key.startswith(starts.SCHEDULE_KEY_PREFIX):
        # A schedule's fire is known by its key: a caller using one would swallow the fire.
        prefix = starts.SCHEDULE_KEY_PREFIX
        raise Invalid(f"idempotency keys starting with '{prefix}' are reserved for schedules",
                      errors=[{"field": "Idempotency-Key", "message": f"must not start with '{prefix}'"}])
    checked = tag_rules.check(tags)
    try:
        fingerprint = starts.request_hash(workflow, version, input, checked)
    except payloads.PayloadError as error:
        raise Invalid(f"input is {error}") from error
    named = uploads.placements(input)
    with transaction.atomic(), connection.cursor() as cursor:
        execution_id, created = starts.start_in(cursor, workspace_id=workspace.pk, input=input, workflow=workflow,
                                         version=version, idempotency_key=idempotency_key, request=fingerprint,
                                         created_by=created_by, system_actor=system_actor,
                                         tags=tag_rules.encode(checked), priority=priority)
        if created and named:
            _fill_uploads(cursor, workspace.pk, execution_id, named)
    return Started(Execution.objects.select_related("version", "workflow").get(pk=execution_id), created)


def _fill_uploads(cursor: Any, workspace_id: int, execution_id: uuid.UUID, named: list[uploads.Placement]) -> None:
    """Put the list of each upload the input names (``{"$upload": id}``) in its place in the
    stored input, inside PostgreSQL: the list never passes through the request or Python."""
    uploads.use(cursor, workspace_id, named)
    try:
        for placement in named:
            payloads.fill_from_upload(cursor, execution_id, payloads.INPUT, path=placement.path,
                                      upload=placement.upload)
    except OperationalError as error:  # jsonb's own limit: a value of at most 255 MB
        if getattr(error.__cause__, "sqlstate", "") != "54000":
            raise
        raise Invalid(f"the uploaded list is too large for one execution input: {error.__cause__}") from error


# --- cancel -------------------------------------------------------------------------------------

def cancel_execution(execution: Execution, *, actor: str = "", system_actor: sudo.VerifiedActor | None = None) -> int:
    """Cancel an execution and every unfinished descendant at any depth (chained executions
    are independent and keep running); returns how many executions were cancelled. When it
    returns, nothing under the execution is left to run (S18, executions/core/cancel.py)."""
    _guard(execution, system_actor, "cancelling executions of")
    message = f"cancelled by {actor}" if actor else "cancelled"
    transient.retrying(lambda: _seal(execution.pk, message))
    return 1 + cancel.cancel_descendants(execution.pk, message=message)


def _check_priority(priority: Any) -> None:
    if (why := priorities.problem(priority)) is not None:
        raise Invalid(f"priority {why}", errors=[{"field": "priority", "message": why}])


def set_priority(execution: Execution, priority: int, *, system_actor: sudo.VerifiedActor | None = None) -> int:
    """Give ``execution``'s whole tree (its root and every descendant, running or not) the
    priority: the claim serves its ready steps by it from now on. Returns the root's old one."""
    _check_priority(priority)
    _guard(execution, system_actor, "changing the priority of")
    with transaction.atomic(), connection.cursor() as cursor:
        root = Execution.objects.select_for_update().only("id", "priority").get(pk=execution.root_id or execution.pk)
        old = root.priority
        priorities.set_tree_priority(cursor, root.pk, priority)
    return old


def _seal(execution_id: uuid.UUID, message: str) -> None:
    """Phase 1 of a cancel: the execution's unfinished steps (its spawners included), then it."""
    with transaction.atomic(), connection.cursor() as cursor:
        current = Execution.objects.get(pk=execution_id)
        if current.is_terminal:
            raise Conflict(f"execution is already {current.status}")
        cancel.cancel_steps(cursor, [execution_id], message=message)
        if not state.cancel_executions(cursor, [execution_id], message=message):
            raise Conflict("execution finished while it was being cancelled")


def cancel_open_children(execution: Execution, *, actor: str = "",
                         system_actor: sudo.VerifiedActor | None = None) -> int:
    """Cancel the unfinished children (and everything under them) of any execution, also one
    that has finished; returns how many executions were cancelled (0: none was open)."""
    _guard(execution, system_actor, "cancelling executions of")
    message = f"cancelled by {actor} (cancel open children)" if actor else "cancelled (cancel open children)"
    return cancel.cancel_descendants(execution.pk, message=message)


# --- retry --------------------------------------------------------------------------------------

def _check_retryable(execution: Execution) -> None:
    if execution.status != E.FAILED:
        raise Conflict(f"only a FAILED execution can be retried; this one is {execution.status}")
    cancelled = selectors.executions.cancelled_ancestor(execution.pk)
    if cancelled is not None:
        raise Conflict(f"its ancestor {cancelled} was cancelled; retrying a child of a cancelled parent "
                       "would run work nobody waits for")


UNCHANGED: Any = object()  # retry_execution's default: keep the stored input


def retry_execution(execution: Execution, *, input: Any = UNCHANGED, actor: str = "",
                    system_actor: sudo.VerifiedActor | None = None) -> Step:
    """Retry a failed execution (a child or a top-level one): same id, same key, a new
    attempt of the step it failed on. A parent whose merge failed on it re-opens (redrive).

    With ``input``, the execution's input is replaced first, in the same transaction (an
    operator's fix of a bad item); the change is noted in its events with both sizes."""
    _guard(execution, system_actor, "retrying executions of")
    edited = None if input is UNCHANGED else _input_text(input)
    execution = Execution.objects.get(pk=execution.pk)
    _check_retryable(execution)
    step = Step.objects.filter(execution=execution, status=S.FAILED).order_by("-finished_at", "-id").first()
    if step is None and not Step.objects.filter(execution=execution).exists():
        raise Conflict(f"its input could not be made from its item, so it never ran ({execution.error}); "
                       "retrying would fail again: fix the list and start the fan-out again")
    if step is None:
        raise Conflict("this execution failed on a FAIL vertex by design; retrying would fail again")
    return _retry_steps(execution, [step], actor, input=edited)[0]


def _input_text(value: Any) -> str:
    named = uploads.placements(value)
    if named:
        where = "$.input" + "".join(f"[{key}]" if key.isdigit() else f".{key}" for key in named[0].path)
        message = ('an edited input cannot name an upload ({"$upload": …}): a retry runs the input as given; '
                   "put the list itself in it, or start a new execution with the upload")
        raise Invalid(message, errors=[{"path": where, "message": "an upload cannot be named here"}])
    try:
        return payloads.encode(value)
    except payloads.PayloadError as error:
        raise Invalid(f"input is {error}", errors=[{"field": "input", "message": str(error)}]) from error


def retry_step(execution: Execution, vertex: str, *, actor: str = "",
               system_actor: sudo.VerifiedActor | None = None) -> Step:
    """Retry one failed step (e.g. a spawner that failed: it re-links existing children and
    creates only never-started ones). A SPAWNER step whose failFast MERGE failed — a failFast
    stop leaves it SUCCEEDED — is retried as its fan-out's failed children are (S28,
    ``retry_failed_children``): its failed and failFast-cancelled children re-run and the
    spawner spawns the items it never started."""
    _guard(execution, system_actor, "retrying executions of")
    execution = Execution.objects.get(pk=execution.pk)
    step = Step.objects.filter(execution=execution, vertex=vertex).first()
    if step is None:
        raise NotFound(f"execution has no step '{vertex}'")
    if step.status != S.FAILED and _merge_failed(execution, step):
        _check_retryable(execution)
        counts = _retry_children(execution, vertex, actor, "retry spawner step")
        if not counts.retried:
            raise Conflict(f"step '{vertex}' is {step.status} and its merge failed, but none of its children can "
                           "be re-run (failed on a FAIL vertex, a bad item, or cancelled by an operator)")
        return Step.objects.get(pk=step.pk)
    if step.status != S.FAILED:
        raise Conflict(f"step '{vertex}' is {step.status}; only a FAILED step can be retried")
    _check_retryable(execution)
    return _retry_steps(execution, [step], actor)[0]


def _merge_failed(execution: Execution, step: Step) -> bool:
    """Whether ``step`` is a SPAWNER whose fan-out's failFast MERGE step has FAILED."""
    merge = FanOut.objects.filter(step=step, fail_fast=True).values_list("merge_vertex", flat=True).first()
    return bool(merge) and Step.objects.filter(execution=execution, vertex=merge, status=S.FAILED).exists()


def _retry_steps(execution: Execution, steps: list[Step], actor: str, *, input: str | None = None) -> list[Step]:
    message = f"retried by {actor}" if actor else "retried"
    with transaction.atomic(), connection.cursor() as cursor:
        workflow = versions.load_version(cursor, execution.version_id).workflow
        budgets = [retry.max_attempts(workflow.vertices[step.vertex]) for step in steps]
        if not state.retry_failed_steps(cursor, [s.pk for s in steps], budgets=budgets, message=message):
            raise Conflict("the step is no longer FAILED")
        if not state.retry_executions(cursor, [execution.pk], message=message):
            raise Conflict("the execution is no longer FAILED")
        retention.require_payloads(cursor, [execution.pk])  # S19: never run with a purged input
        if input is not None:
            _replace_input(cursor, execution, steps[0], input, actor)
        notify.work_created(cursor)
    return list(Step.objects.filter(pk__in=[s.pk for s in steps]))


def _replace_input(cursor: Any, execution: Execution, step: Step, text: str, actor: str) -> None:
    before = selectors.payloads.preview(execution.pk, payloads.INPUT)
    payloads.copy(cursor, execution.pk, payloads.INPUT, payloads.INPUT_BEFORE)  # for the UI's diff
    payloads.put_many(cursor, [(execution.pk, payloads.INPUT, text)])
    size = len(text.encode())
    was = f"{before.size_bytes:,} bytes" if before else "none"
    message = (f"{selectors.steps.INPUT_EDITED} by {actor or 'an operator'} for this retry "
               f"(was {was}, now {size:,} bytes)")
    state.note(cursor, [(execution.pk, step.pk, step.vertex, step.attempt + 1, message)])


def retry_failed_children(parent: Execution, *, spawner: str | None = None, actor: str = "",
                          system_actor: sudo.VerifiedActor | None = None) -> recovery.Counts:
    """Retry every FAILED child of ``parent`` (of one spawner, if given) in one transaction,
    and — where the fan-out's failFast merge failed — the children failFast cancelled and the
    items its spawner never started (S28, executions/fanout/recovery.py); returns what it re-runs.
    Children that failed on a FAIL vertex, and children an operator cancelled, are not."""
    _guard(parent, system_actor, "retrying executions of")
    parent = Execution.objects.get(pk=parent.pk)
    if parent.status == E.CANCELLED:
        raise Conflict("the execution was cancelled; its children cannot be retried")
    cancelled = selectors.executions.cancelled_ancestor(parent.pk)
    if cancelled is not None:
        raise Conflict(f"its ancestor {cancelled} was cancelled")
    return _retry_children(parent, spawner, actor, "retry all failed")


def _retry_children(parent: Execution, spawner: str | None, actor: str, action: str) -> recovery.Counts:
    message = f"retried by {actor} ({action})" if actor else f"retried ({action})"
    with transaction.atomic(), connection.cursor() as cursor:
        counts = recovery.retry_children(cursor, parent.pk, spawner=spawner, message=message)
        if counts.retried:
            notify.work_created(cursor)
    return counts


def retry_failed_preview(parent: Execution, *, spawner: str | None = None) -> recovery.Counts:
    """What ``retry_failed_children`` (and retrying the spawner step of a failed merge)
    would re-run and spawn now; nothing is changed."""
    with connection.cursor() as cursor:
        return recovery.preview(cursor, parent.pk, spawner=spawner)


def get_execution(workspace: Workspace, execution_id: Any) -> Execution:
    try:
        return Execution.objects.select_related("version", "workflow", "parent").get(
            pk=execution_id, workspace=workspace)
    except (Execution.DoesNotExist, ValueError, ValidationError) as error:
        raise NotFound(f"no execution {execution_id}") from error

