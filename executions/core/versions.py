"""Workflow versions as the engine runs them: parsed once per process.

Versions are immutable (S14, enforced by a trigger), so a parsed version is cached for the
life of the process and never invalidated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions.core import payloads
from workflows import dsl

# The rows of the versions to parse.
VERSIONS = """
    SELECT v.id, v.definition_id, v.hash, v.dsl, d.key
    FROM workflows_workflowversion v JOIN workflows_workflowdefinition d ON d.id = v.definition_id
    WHERE v.id = ANY(%(ids)s)
"""


@dataclass(frozen=True)
class LoadedVersion:
    id: int
    definition_id: int
    hash: str
    workflow: dsl.Workflow
    key: str  # its workflow's key (a definition's key never changes)


_versions: dict[int, LoadedVersion] = {}


def load_version(cursor: Any, version_id: int) -> LoadedVersion:
    return load_versions(cursor, [version_id])[version_id]


def load_versions(cursor: Any, version_ids: Sequence[int]) -> dict[int, LoadedVersion]:
    missing = [vid for vid in set(version_ids) if vid not in _versions]
    if missing:
        cursor.execute(VERSIONS, {"ids": missing})
        for vid, definition_id, digest, doc, key in cursor.fetchall():
            _versions[vid] = LoadedVersion(vid, definition_id, digest, dsl.parse(payloads.decode(doc)), key)
    return {vid: _versions[vid] for vid in version_ids}


def get(version_id: int) -> LoadedVersion:
    """A version outside any transaction of the caller's (its own short read)."""
    with connection.cursor() as cursor:
        return load_version(cursor, version_id)
