"""Starting an execution inside the caller's transaction: the one way an execution starts.

The services (``executions.services.lifecycle``: the API, the UI, commands), the schedules and
the CHAIN vertex all start executions through ``start_in``: it resolves the version, applies
S15's rule for reserved workflows, inserts the execution (idempotent on its key), reserves one
execution of quota, stores the input and inserts the first step. Children of a SPAWNER are
created in batches by the fan-out instead (executions/fanout/spawn.py).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from executions.core import payloads, quotas, records, retry, versions
from executions.models import Execution
from workflows import sudo
from workflows.errors import Conflict, NotFound, QuotaExceededError
from workflows.models import WorkflowDefinition, WorkflowVersion

# The idempotency keys of schedules' fires (services/schedules.py): callers may not use them.
SCHEDULE_KEY_PREFIX = "schedule:"

# The workflow key of the execution whose CHAIN starts another (S15's engine rule).
STARTER_KEY = """
    SELECT d.key FROM executions_execution e JOIN workflows_workflowdefinition d ON d.id = e.workflow_id
    WHERE e.id = %(execution)s
"""


def request_hash(workflow: str | None, version: str | None, data: Any, tags: dict[str, str] | None = None) -> str:
    """Fingerprint of a start request, to tell a retry from a different request reusing a key
    (tags count only when given, so the fingerprints of untagged starts stay what they were)."""
    fields: dict[str, Any] = {"workflow": workflow, "version": version, "input": data}
    if tags:
        fields["tags"] = tags
    body = payloads.encode(fields)
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
             created_by: str = "", system_actor: sudo.VerifiedActor | None = None,
             tags: str | None = None, priority: int | None = None) -> tuple[uuid.UUID, bool]:
    """Start an execution inside the caller's transaction; returns ``(id, created)`` — the
    existing id for a repeated idempotency key. Reserves one execution of quota. A reserved
    workflow needs ``system_actor``, or (for a CHAIN, ``chained_from``) a reserved starter.
    ``tags``: JSON text of its tags (checked by the caller: workflows/tags.py; a CHAIN passes
    its execution's, which a chained execution inherits). ``priority`` None: the chaining
    execution's, else the default (records.INSERT_EXECUTIONS)."""
    target = resolve_version(workspace_id, workflow=workflow, version=version, definition_id=definition_id)
    _guard_start(cursor, target.definition.key, system_actor, chained_from)
    text = payloads.encode(input)
    new_id = execution_id or uuid.uuid4()
    inserted = records.insert_executions(cursor, [records.NewExecution(
        workspace_id, target.definition_id, target.pk, id=new_id, idempotency_key=idempotency_key,
        request_hash=request, chained_from_id=chained_from, created_by=created_by, tags=tags,
        priority=priority)])
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


def _existing(workspace_id: int, key: str | None, request: str) -> uuid.UUID:
    existing = Execution.objects.filter(workspace_id=workspace_id, idempotency_key=key).only("id", "request_hash").get()
    if request and existing.request_hash != request:
        raise Conflict(f"idempotency key '{key}' was already used for a different request "
                       f"(execution {existing.id})")
    return existing.id
