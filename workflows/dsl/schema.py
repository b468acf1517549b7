"""The outline of a workflow document as JSON Schema (2020-12), for the API's schema: the
fields a document has and each vertex's ``type``. What else makes a document valid — the
fields of each vertex type, JSON paths, that ``start`` and every ``next`` name a vertex, the
graph's shape — is checked by ``parser.parse`` (docs/dsl.md), which no schema states; the
one exception is a MERGE's quorum (``CONFIG``), whose fields it states."""

from __future__ import annotations

from typing import Any

from workflows.dsl.ast import VERTEX_TYPES
from workflows.dsl.parser import VERTEX_ID

_ID = {"type": "string", "pattern": f"^{VERTEX_ID.pattern}$"}

# A MERGE's quorum (S26, docs/dsl.md "Quorum merges"). Only a MERGE has a ``config``, so its
# fields are stated for any vertex's ``config`` (no if/then: generators and readers stay simple);
# that the two exclude each other is the parser's (a 400 at the path).
CONFIG: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "A MERGE's settings (docs/dsl.md): tolerateChildFailures, failureTolerance, failFast, and a "
                   "quorum — minSuccessful or minSuccessfulRatio, not both.",
    "properties": {
        "minSuccessful": {"type": ["integer", "null"], "minimum": 1,
                          "description": "Succeed once this many children succeeded."},
        "minSuccessfulRatio": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1,
                               "description": "The quorum as a share of the children: ceil(r × N)."},
    },
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
                                     "properties": {"type": {"enum": sorted(VERTEX_TYPES)}, "config": CONFIG}},
        },
    },
}
