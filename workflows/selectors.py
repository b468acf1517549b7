"""Reads for workflow definitions and versions."""

from __future__ import annotations

import difflib
import json

from django.db.models import Q

from workflows.models import WorkflowVersion


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
