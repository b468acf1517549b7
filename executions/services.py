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

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import OperationalError, connection, transaction

from executions import (
    cancel,
    kick,
    payloads,
    quotas,
    records,
    recovery,
    retention,
    retry,
    selectors,
    state,
    transient,
    uploads,
    versions,
)
from executions.models import Execution, ExecutionStatus, FanOut, Step, StepStatus
from workflows import sudo
from workflows.errors import Conflict, Invalid, NotFound, QuotaExceededError
from workflows.models import WorkflowDefinition, WorkflowVersion, Workspace

E, S = ExecutionStatus, StepStatus

# The workflow key of the execution whose CHAIN starts another (S15's engine rule).
STARTER_KEY = """
    SELECT d.key FROM executions_execution e JOIN workflows_workflowdefinition d ON d.id = e.workflow_id
    WHERE e.id = %(execution)s
"""


IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")


@dataclass(frozen=True)
class Started:
    execution: Execution
    created: bool


def request_hash(workflow: str | None, version: str | None, data: Any) -> str:
    """Fingerprint of a start request, to tell a retry from a different request reusing a key."""
    body = payloads.encode({"workflow": workflow, "version": version, "input": data})
    return hashlib.sha256(body.encode()).hexdigest()


def resolve_version(workspace_id: int, *, workflow: str | None = None, version: str | None = None,
                    definition_id: int | None = None) -> WorkflowVersion:
    """The version to run: an explicit hash (within the workflow, if named) or the current one."""
    definitions = WorkflowDefinition.objects.filter(workspace_id=workspace_id)
    if definition_id is not None:
        definitions = definitions.filter(pk=definition_id)
    elif workflow is not None:
        definitions = definitions.filter(key=workflow)
    if version is not None:
        found = list(WorkflowVersion.objects.filter(definition__in=definitions, hash=version)
                     .select_related("definition").order_by("id")[:10])
        if not found:
            scope = f" of workflow '{workflow}'" if workflow else ""
            raise NotFound(f"no version {version}{scope} in this workspace")
        if len(found) > 1:
            # The same logic published under several keys: which workflow runs (and whether a
            # reserved one is involved, S15) must not depend on which was published first.
            keys = ", ".join(sorted(f"'{v.definition.key}'" for v in found))
            raise Conflict(f"version {version[:12]} belongs to several workflows ({keys}); name the workflow too")
        return found[0]
    definition = definitions.select_related("current_version").first() if (workflow or definition_id) else None
    if definition is None:
        raise NotFound(f"no workflow '{workflow}' in this workspace")
    if definition.current_version is None:
        raise Conflict(f"workflow '{definition.key}' has no published version")
    current = definition.current_version
    current.definition = definition  # the caller checks its key (S15): spare the query
    return current


def start_in(cursor: Any, *, workspace_id: int, input: Any, workflow: str | None = None,
             version: str | None = None, definition_id: int | None = None, execution_id: uuid.UUID | None = None,
             idempotency_key: str | None = None, request: str = "", chained_from: uuid.UUID | None = None,
             created_by: str = "", system_actor: sudo.VerifiedActor | None = None) -> tuple[uuid.UUID, bool]:
    """Start an execution inside the caller's transaction; returns ``(id, created)`` — the
    existing id for a repeated idempotency key. Reserves one execution of quota. A reserved
    workflow needs ``system_actor``, or (for a CHAIN, ``chained_from``) a reserved starter."""
    target = resolve_version(workspace_id, workflow=workflow, version=version, definition_id=definition_id)
    _guard_start(cursor, target.definition.key, system_actor, chained_from)
    text = payloads.encode(input)
    new_id = execution_id or uuid.uuid4()
    inserted = records.insert_executions(cursor, [records.NewExecution(
        workspace_id, target.definition_id, target.pk, id=new_id, idempotency_key=idempotency_key,
        request_hash=request, chained_from_id=chained_from, created_by=created_by)])
    if not inserted:
        if idempotency_key is None:  # only a CHAIN's derived id repeats without a key
            return new_id, False
        return _existing(workspace_id, idempotency_key, request), False
    try:
        quotas.reserve(cursor, workspace_id, 1)
    except quotas.QuotaExceeded as error:
        raise QuotaExceededError(str(error)) from error
    payloads.put_many(cursor, [(new_id, payloads.INPUT, text)])
    parsed = versions.load_version(cursor, target.pk).workflow
    start = parsed.vertices[parsed.start]
    records.insert_steps(cursor, [records.NewStep(new_id, workspace_id, start.id, retry.max_attempts(start),
                                                  destination=getattr(start, "destination_name", None))])
    return new_id, True


def _guard_start(cursor: Any, key: str, system_actor: sudo.VerifiedActor | None,
                 chained_from: uuid.UUID | None) -> None:
    """S15 for a start: a reserved workflow needs a system actor — or, for a CHAIN, a reserved
    starter — and a reserved starter may chain only to reserved workflows."""
    if system_actor is None and chained_from is not None:
        cursor.execute(STARTER_KEY, {"execution": chained_from})
        row = cursor.fetchone()
        starter = row[0] if row else None
        if starter is not None:
            sudo.check_reserved_dependency(starter, target=key)
        if sudo.is_reserved(key):
            sudo.require_engine_start(key, starter, "a CHAIN")
        return
    if sudo.is_reserved(key):
        sudo.require(key, system_actor, "starting")


def _guard(execution: Execution, system_actor: sudo.VerifiedActor | None, doing: str) -> None:
    """Refuse ``doing`` an execution of a reserved workflow, or one in a reserved workflow's
    tree (its root's workflow), without a system actor covering both keys."""
    own, root = (Execution.objects.filter(pk=execution.pk)
                 .values_list("workflow__key", "root__workflow__key").get())
    for key in dict.fromkeys([own, root or own]):
        sudo.require(key, system_actor, doing)


def _existing(workspace_id: int, key: str | None, request: str) -> uuid.UUID:
    existing = Execution.objects.filter(workspace_id=workspace_id, idempotency_key=key).only("id", "request_hash").get()
    if request and existing.request_hash != request:
        raise Conflict(f"idempotency key '{key}' was already used for a different request "
                       f"(execution {existing.id})")
    return existing.id


def start_execution(workspace: Workspace, *, input: Any, workflow: str | None = None,
                    version: str | None = None, idempotency_key: str | None = None,
                    created_by: str = "", system_actor: sudo.VerifiedActor | None = None) -> Started:
    """Start an execution of ``workflow`` (its current version) or of version ``version``."""
    if workflow is None and version is None:
        raise Invalid("give a workflow key or a version hash")
    if idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise Invalid("an idempotency key is 1 to 255 printable ASCII characters")
    try:
        fingerprint = request_hash(workflow, version, input)
    except payloads.PayloadError as error:
        raise Invalid(f"input is {error}") from error
    named = uploads.placements(input)
    with transaction.atomic(), connection.cursor() as cursor:
        execution_id, created = start_in(cursor, workspace_id=workspace.pk, input=input, workflow=workflow,
                                         version=version, idempotency_key=idempotency_key, request=fingerprint,
                                         created_by=created_by, system_actor=system_actor)
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
    returns, nothing under the execution is left to run (S18, executions/cancel.py)."""
    _guard(execution, system_actor, "cancelling executions of")
    message = f"cancelled by {actor}" if actor else "cancelled"
    transient.retrying(lambda: _seal(execution.pk, message))
    return 1 + cancel.cancel_descendants(execution.pk, message=message)


def _seal(execution_id: uuid.UUID, message: str) -> None:
    """Phase 1 of a cancel: the execution's unfinished steps (its spawners included), then it."""
    with transaction.atomic(), connection.cursor() as cursor:
        current = Execution.objects.get(pk=execution_id)
        if current.is_terminal:
            raise Conflict(f"execution is already {current.status}")
        state.cancel_open_steps(cursor, [execution_id], message=message)
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
        kick.work_created(cursor)
    return list(Step.objects.filter(pk__in=[s.pk for s in steps]))


def _replace_input(cursor: Any, execution: Execution, step: Step, text: str, actor: str) -> None:
    before = selectors.payloads.preview(execution.pk, payloads.INPUT)
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
    items its spawner never started (S28, executions/recovery.py); returns what it re-runs.
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
            kick.work_created(cursor)
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

