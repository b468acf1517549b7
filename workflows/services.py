"""Writes for workflow definitions and versions.

Publishing is idempotent and race-free: the version row is inserted with
``ON CONFLICT (definition, hash) DO NOTHING``, so concurrent identical publishes create one
version, and a repeated publish returns the existing one.

A reserved key (S15) is published only for a verified system actor covering it
(``workflows.sudo``); whoever else calls — admin, API token, command — is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from workflows import dsl, sudo
from workflows.handlers import registry
from workflows.models import Plan, WorkflowDefinition, WorkflowVersion, Workspace

_INSERT_DEFINITION = """
INSERT INTO workflows_workflowdefinition (workspace_id, key, created_at, updated_at)
VALUES (%s, %s, now(), now())
ON CONFLICT (workspace_id, key) DO NOTHING
"""

_INSERT_VERSION = """
INSERT INTO workflows_workflowversion (definition_id, hash, canonical, dsl, author, created_at)
VALUES (%s, %s, %s, %s::jsonb, %s, now())
ON CONFLICT (definition_id, hash) DO NOTHING
RETURNING id
"""


@dataclass(frozen=True)
class Published:
    version: WorkflowVersion
    created: bool


def validate(doc: Any) -> dsl.Workflow:
    """Parse a document and check what only the running system knows (registered TASK
    handlers); raises DslError with every problem and its path."""
    workflow = dsl.parse(doc)
    errors = [
        (f"$.vertices.{vertex.id}.handler", f"no TASK handler is registered as '{vertex.handler}'")
        for vertex in workflow.vertices.values()
        if isinstance(vertex, dsl.ast.Task) and vertex.handler not in registry
    ]
    if errors:
        raise dsl.DslError(errors)
    return workflow


def publish_version(workspace: Workspace, key: str, doc: Any, *, author: str = "",
                    system_actor: sudo.VerifiedActor | None = None) -> Published:
    """Validate ``doc``, store it as a version of definition ``key`` (creating the definition
    if needed) and make it the current version. Re-publishing an existing hash creates
    nothing and makes that version current again (a rollback is a re-publish). A reserved
    ``key`` needs ``system_actor`` (raises ``sudo.ReservedKeyDenied`` otherwise)."""
    from workflows.dsl.parser import WORKFLOW_KEY

    if not isinstance(key, str) or not WORKFLOW_KEY.fullmatch(key):
        raise dsl.DslError([("key", "a workflow key is 1-128 letters, digits, '.', '_' or '-'")])
    sudo.require(key, system_actor, "publishing to")
    workflow = validate(doc)
    sudo.check_reserved_dependencies(key, workflow)
    canonical = dsl.canonical_of(workflow)
    digest = dsl.hash_of(workflow)
    text = canonical.decode()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_INSERT_DEFINITION, [workspace.pk, key])
        definition = WorkflowDefinition.objects.select_for_update().get(workspace=workspace, key=key)
        cursor.execute(_INSERT_VERSION, [definition.pk, digest, text, text, author])
        created = cursor.fetchone() is not None
        version = WorkflowVersion.objects.get(definition=definition, hash=digest)
        if definition.current_version_id != version.pk:
            definition.current_version = version
            definition.save(update_fields=["current_version", "updated_at"])
    return Published(version=version, created=created)




def ensure_default_workspace() -> Workspace:
    """The ``default`` workspace and plan (a migration creates them; this re-creates them if
    they were removed, so the local main job always has a workspace to run in)."""
    plan, _ = Plan.objects.get_or_create(name="default", defaults={"executions_per_day": 5_000_000})
    workspace, _ = Workspace.objects.get_or_create(slug="default", defaults={"name": "Default workspace", "plan": plan})
    return workspace
