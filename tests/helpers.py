"""Helpers for tests: workspaces, publishing, and running the engine in-process."""

from __future__ import annotations

from typing import Any

from django.db import connection

from executions import services
from executions.models import Execution, Step
from executions.worker import Drain
from workflows.models import Plan, Workspace
from workflows.services import publish_version

NOOP = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop"}}}
FAIL_IF = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if",
                                            "retry": {"maxAttempts": 1}}}}


def default_workspace() -> Workspace:
    """The migration's default workspace (re-created after a transactional test's flush)."""
    plan, _ = Plan.objects.get_or_create(name="default", defaults={"executions_per_day": 5_000_000})
    workspace, _ = Workspace.objects.get_or_create(slug="default", defaults={"name": "Default workspace",
                                                                             "plan": plan})
    return workspace


def make_workspace(slug: str, *, quota: int = 1_000_000) -> Workspace:
    plan, _ = Plan.objects.get_or_create(name=f"plan-{slug}", defaults={"executions_per_day": quota})
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug, "plan": plan})
    return workspace


def publish(workspace: Workspace, key: str, doc: dict[str, Any]) -> Any:
    return publish_version(workspace, key, doc, author="test").version


def fanout_doc(child: str = "child", *, items: str = "$.input.items", merge_config: dict[str, Any] | None = None,
               item_input: Any = None) -> dict[str, Any]:
    spawner: dict[str, Any] = {"type": "SPAWNER", "items": items, "workflow": child, "next": "join"}
    if item_input is not None:
        spawner["itemInput"] = item_input
    join: dict[str, Any] = {"type": "MERGE", "spawner": "fan", "next": "done"}
    if merge_config is not None:
        join["config"] = merge_config
    return {"start": "fan", "vertices": {"fan": spawner, "join": join, "done": {"type": "SUCCEED"}}}


def start(workspace: Workspace, workflow: str, data: Any, **kwargs: Any) -> Execution:
    return services.start_execution(workspace, workflow=workflow, input=data, **kwargs).execution


def run_engine(*, max_seconds: float = 60.0, threads: int = 0, batch: int = 256) -> int:
    """Run the engine in this process until no step is claimable now (timers in the future
    are left waiting). threads=0 runs inline, inside the test's transaction."""
    return Drain(max_seconds=max_seconds, idle_seconds=0.0, threads=threads, batch=batch, linger=False).run()


def refresh(execution: Execution) -> Execution:
    return Execution.objects.get(pk=execution.pk)


def step(execution: Execution, vertex: str) -> Step:
    return Step.objects.get(execution=execution, vertex=vertex)


def make_due(execution: Execution | None = None) -> None:
    """Bring every READY step's due time to now (instead of sleeping in a test)."""
    with connection.cursor() as cursor:
        if execution is None:
            cursor.execute("UPDATE executions_step SET due_at = now() WHERE status = 'READY'")
        else:
            cursor.execute("UPDATE executions_step SET due_at = now() WHERE status = 'READY' AND execution_id = %s",
                           [execution.pk])


def child_counts(parent: Execution) -> dict[str, int]:
    from django.db.models import Count

    rows = Execution.objects.filter(parent=parent).values("status").annotate(n=Count("id")).order_by()
    return {row["status"]: row["n"] for row in rows}
