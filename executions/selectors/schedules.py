"""Reads of schedules: keyset pages and lookups within a workspace (the API and the
Schedules page)."""

from __future__ import annotations

from executions.models import Schedule
from workflows.errors import NotFound
from workflows.models import Workspace


def page(workspace: Workspace, *, after: str | None, limit: int) -> list[Schedule]:
    """Up to ``limit + 1`` schedules by name, after the name ``after`` (a keyset page)."""
    rows = Schedule.objects.filter(workspace=workspace).select_related("workflow")
    if after is not None:
        rows = rows.filter(name__gt=after)
    return list(rows.order_by("name")[: limit + 1])


def named(workspace: Workspace, name: str) -> Schedule:
    found = Schedule.objects.filter(workspace=workspace, name=name).select_related("workflow").first()
    if found is None:
        raise NotFound(f"no schedule '{name}' in this workspace")
    return found
