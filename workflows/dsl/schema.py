"""The outline of a workflow document as JSON Schema (2020-12), for the API's schema: the
fields a document has and each vertex's ``type``. What else makes a document valid — the
fields of each vertex type, JSON paths, that ``start`` and every ``next`` name a vertex, the
graph's shape — is checked by ``parser.parse`` (docs/dsl.md), which no schema states; the
one exception is a MERGE's quorum (``MERGE_QUORUM``), whose two exclusive fields it states."""

from __future__ import annotations

from typing import Any

from workflows.dsl.ast import VERTEX_TYPES
from workflows.dsl.parser import VERTEX_ID

_ID = {"type": "string", "pattern": f"^{VERTEX_ID.pattern}$"}

# A MERGE's quorum (S26, docs/dsl.md "Quorum merges"): minSuccessful or minSuccessfulRatio, not both.
MERGE_QUORUM: dict[str, Any] = {
    "if": {"properties": {"type": {"const": "MERGE"}}, "required": ["type"]},
    "then": {"properties": {"config": {
        "type": "object",
        "properties": {
            "minSuccessful": {"type": ["integer", "null"], "minimum": 1,
                              "description": "Succeed once this many children succeeded."},
            "minSuccessfulRatio": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1,
                                   "description": "The quorum as a share of the children: ceil(r × N)."},
        },
        "not": {"required": ["minSuccessful", "minSuccessfulRatio"],
                "properties": {"minSuccessful": {"type": "integer"}, "minSuccessfulRatio": {"type": "number"}}},
    }}},
}

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
                                     "properties": {"type": {"enum": sorted(VERTEX_TYPES)}},
                                     "allOf": [MERGE_QUORUM]},
        },
    },
}
