"""CHAIN: start the next piece of work as a new, independent execution (S13) — of another
workflow, or of this one (``"self"``: continue-as-new) — and carry on (or finish). The new
execution starts on the target's *current* version and is linked by ``chained_from``."""

from __future__ import annotations

import uuid
from typing import cast

from executions.core import starts
from executions.core.outcomes import Outcome, committed, succeeded
from executions.core.runs import StepRun
from executions.engine.vertices.common import needs_of
from executions.handlers import NonRetryable
from workflows.dsl import ast
from workflows.dsl.paths import render
from workflows.errors import ServiceError


def needs(vertex: ast.Chain) -> set[str]:
    return needs_of(vertex.input)


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Chain, step.vertex)
    data = render(vertex.input, step.context)
    # Derived from this step, so a redelivered CHAIN finds the execution it already started.
    new_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{step.idempotency_key}:chain")
    with step.transaction() as tx:
        try:
            started, _ = starts.start_in(
                tx.cursor, workspace_id=step.execution.workspace_id,
                definition_id=step.version.definition_id if vertex.workflow == "self" else None,
                workflow=None if vertex.workflow == "self" else vertex.workflow,
                input=data, execution_id=new_id, chained_from=step.execution.id,
                created_by=f"chain:{step.execution.id}", tags=step.execution.tags,
            )
        except ServiceError as error:
            raise NonRetryable(f"CHAIN could not start '{vertex.workflow}': {error.message}") from error
        tx.finish(succeeded({"execution": str(started), "workflow": vertex.workflow}))
    return committed()
