"""Reads of workflow definitions and versions: the API's pages, the UI's Workflows page and
filter choices, the admin's diff against the previous version. (The rest of the read layer
is executions/selectors/.)"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from workflows.errors import NotFound
from workflows.models import WorkflowDefinition, WorkflowVersion, Workspace

VERSIONS_SHOWN = 100


def definitions_page(workspace: Workspace, *, after: str | None, limit: int) -> list[WorkflowDefinition]:
    """Up to ``limit + 1`` definitions by key, after the key ``after`` (a keyset page)."""
    rows = WorkflowDefinition.objects.filter(workspace=workspace).select_related("current_version")
    if after is not None:
        rows = rows.filter(key__gt=after)
    return list(rows.order_by("key")[: limit + 1])


def definition(workspace: Workspace, key: str) -> WorkflowDefinition:
    """A definition with its newest versions in ``recent_versions`` and ``version_count``."""
    found = WorkflowDefinition.objects.filter(workspace=workspace, key=key).select_related("current_version").first()
    if found is None:
        raise NotFound(f"no workflow '{key}' in this workspace")
    versions = WorkflowVersion.objects.filter(definition=found).order_by("-created_at", "-id")
    # Attributes read by the serializer (the model has no such fields).
    found.recent_versions = list(versions.defer("canonical", "dsl")[:VERSIONS_SHOWN])  # type: ignore[attr-defined]
    found.version_count = versions.count()  # type: ignore[attr-defined]
    return found


def definitions(workspace: Workspace) -> list[WorkflowDefinition]:
    """Every definition by key with the few columns of its current version a list shows."""
    return list(WorkflowDefinition.objects.filter(workspace=workspace).select_related("current_version")
                .only("id", "key", "updated_at", "current_version__id", "current_version__hash",
                      "current_version__created_at", "current_version__author").order_by("key"))


def keys(workspace: Workspace) -> list[str]:
    return list(WorkflowDefinition.objects.filter(workspace=workspace).order_by("key").values_list("key", flat=True))


@dataclass
class VersionView:
    """One content hash: the same logic may be published under several keys."""

    hash: str
    workflows: list[str]
    author: str
    created_at: datetime
    dsl: Any


def version(workspace: Workspace, digest: str) -> VersionView:
    rows = list(WorkflowVersion.objects.filter(definition__workspace=workspace, hash=digest)
                .select_related("definition").order_by("created_at", "id"))
    if not rows:
        raise NotFound(f"no version {digest} in this workspace")
    first = rows[0]
    return VersionView(hash=digest, workflows=[row.definition.key for row in rows], author=first.author,
                       created_at=first.created_at, dsl=first.dsl)


def version_of(workspace: Workspace, key: str, digest: str) -> WorkflowVersion:
    """Version ``digest`` of workflow ``key`` (its definition loaded), in this workspace."""
    found = (WorkflowVersion.objects.filter(definition__workspace=workspace, definition__key=key, hash=digest)
             .select_related("definition").first())
    if found is None:
        raise NotFound(f"no version {digest[:64]} of workflow '{key}' in this workspace")
    return found


# --- the admin's diff (also the UI's) ---------------------------------------------------------------------------

def pretty_canonical(version: WorkflowVersion) -> str:
    """The canonical DSL, indented for people (same content as the hashed bytes)."""
    return json.dumps(json.loads(version.canonical), indent=2, sort_keys=True)


def previous_version(version: WorkflowVersion) -> WorkflowVersion | None:
    # Ties on created_at (database time is a transaction's start) are broken by id.
    earlier = Q(created_at__lt=version.created_at) | Q(created_at=version.created_at, id__lt=version.pk)
    return (
        WorkflowVersion.objects.filter(definition_id=version.definition_id)
        .filter(earlier)
        .order_by("-created_at", "-id")
        .first()
    )


def version_diff(version: WorkflowVersion) -> str:
    """A unified diff of the canonical DSL against the previous version ('' for the first)."""
    previous = previous_version(version)
    if previous is None:
        return ""
    lines = difflib.unified_diff(
        pretty_canonical(previous).splitlines(),
        pretty_canonical(version).splitlines(),
        fromfile=f"{previous.short_hash}",
        tofile=f"{version.short_hash}",
        lineterm="",
    )
    return "\n".join(lines)
