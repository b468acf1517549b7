"""Path converters that only match identifiers that can exist.

A path parameter that could never name an object (``%00``, an over-long key, a malformed
hash) does not reach a query: it does not match the route, and the API's catch-all answers
404. ``OPENAPI`` gives the same patterns to the schema.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.urls import register_converter

from workflows.dsl.parser import DESTINATION_NAME, VERSION_HASH, VERTEX_ID, WORKFLOW_KEY


class _Pattern:
    regex = ""

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: object) -> str:
        return str(value)


class WorkflowKey(_Pattern):
    regex = WORKFLOW_KEY.pattern


class VersionHash(_Pattern):
    regex = VERSION_HASH.pattern


class Vertex(_Pattern):
    regex = VERTEX_ID.pattern


class DestinationName(_Pattern):
    regex = DESTINATION_NAME.pattern


class ScheduleName(_Pattern):
    regex = DESTINATION_NAME.pattern  # the same rule as destination names (executions/services/schedules.py)


class ExecutionId:
    """Any spelling ``uuid.UUID`` accepts would do, but one canonical form keeps links stable."""

    regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_url(self, value: object) -> str:
        return str(value)


CONVERTERS: dict[str, Any] = {"wfkey": WorkflowKey, "vhash": VersionHash, "vertex": Vertex, "destname": DestinationName,
              "schedname": ScheduleName, "execid": ExecutionId}

OPENAPI = {name: {"type": "string", "pattern": f"^{cls.regex}$"} for name, cls in CONVERTERS.items()}
OPENAPI["execid"] = {"type": "string", "format": "uuid"}


def register() -> None:
    for name, converter in CONVERTERS.items():
        register_converter(converter, name)
