"""The outline of a workflow document as JSON Schema (2020-12), for the API's schema: the
fields a document has and each vertex's ``type``. What else makes a document valid — the
fields of each vertex type, JSON paths, that ``start`` and every ``next`` name a vertex, the
graph's shape — is checked by ``parser.parse`` (docs/dsl.md), which no schema states."""

from __future__ import annotations

from typing import Any

from workflows.dsl.ast import VERTEX_TYPES
from workflows.dsl.parser import VERTEX_ID

_ID = {"type": "string", "pattern": f"^{VERTEX_ID.pattern}$"}

DOCUMENT: dict[str, Any] = {
    "type": "object",
    "description": "A workflow document (docs/dsl.md): `start` names the first vertex of `vertices`.",
    "required": ["start", "vertices"],
    "additionalProperties": False,
    "properties": {
        "start": _ID,
        "vertices": {
            "type": "object", "minProperties": 1, "propertyNames": _ID,
            "additionalProperties": {"type": "object", "required": ["type"],
                                     "properties": {"type": {"enum": sorted(VERTEX_TYPES)}}},
        },
    },
}
