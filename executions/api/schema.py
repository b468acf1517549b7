"""OpenAPI details drf-spectacular cannot infer: the token scheme, problem responses and
page envelopes.

Each view declares its success responses and the problems only it can return (409, 429);
``add_problem_responses`` adds the ones every operation of a kind can return, so the schema
says exactly what a client (or schemathesis) will see.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from executions.api.errors import PROBLEM_MEDIA_TYPE
from executions.api.serializers import JSON_REF, ProblemSerializer

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

_GENERIC = {
    "400": "Invalid request: bad JSON, a wrong field, query parameter or header (see `errors`).",
    "401": "Missing, unknown, revoked or expired token.",
    "403": "The token's role may not do this (or the session user belongs to no workspace).",
    "404": "No such object in this workspace (objects of other workspaces are never visible).",
    "413": "The request body is over its endpoint's limit (SB_MAX_START_BYTES, SB_MAX_PUBLISH_BYTES, "
           "SB_MAX_WRITE_BYTES).",
    "429": "Too many failed token authentications from this address, or too many refused claims with this token "
           "(see Retry-After).",
    "415": "The body is not `application/json`.",
}


def problems(**by_status: str) -> dict[tuple[int, str], OpenApiResponse]:
    """``problems(s409="…")`` → problem responses keyed for ``extend_schema(responses=…)``."""
    return {(int(key[1:]), PROBLEM_MEDIA_TYPE): OpenApiResponse(ProblemSerializer, description=text)
            for key, text in by_status.items()}


def page_of(item: type[serializers.Serializer], name: str) -> serializers.Serializer:
    return inline_serializer(name=f"{name}Page", fields={
        "results": item(many=True),
        "next": serializers.URLField(allow_null=True, help_text="The next page, or null on the last one."),
    })


class StrictBody(OpenApiSerializerExtension):
    """A strict request body (``StrictSerializer``) refuses unknown fields: the schema says so."""

    target_class = "executions.api.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, **self.target.schema_extra, "additionalProperties": False}


class TokenScheme(OpenApiAuthenticationExtension):
    target_class = "executions.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <secret>`; create one with `manage.py sb_token create`."}


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "executions.api.auth.SessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": "sessionid",
                "description": "The operator UI's own session (CSRF token required on writes)."}


# No NUL. An unpaired surrogate is refused too, but a pattern cannot say so usefully: it is not a
# Unicode scalar value, so fuzzers never generate one and cannot read a pattern that names it.
_STORABLE_TEXT = {"type": "string", "pattern": "^[^\\x00]*$"}
JSON_COMPONENT = {
    "description": "Any JSON value the API can store: no NUL character (\\u0000) or unpaired surrogate in a "
                   "string or key, nested at most 100 levels deep.",
    "anyOf": [_STORABLE_TEXT, {"type": ["number", "boolean", "null"]},
              {"type": "array", "items": JSON_REF},
              {"type": "object", "propertyNames": _STORABLE_TEXT, "additionalProperties": JSON_REF}],
}


# Operations whose body drf-spectacular cannot know is required (it is a schema of our own).
REQUIRED_BODIES = ("create_upload", "publish_version", "start_execution")


def add_components(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: the components fields refer to by hand (``Json``),
    and ``required`` on the bodies of ``REQUIRED_BODIES``."""
    result.setdefault("components", {}).setdefault("schemas", {})["Json"] = JSON_COMPONENT
    _drop_any_or_null(result)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict) and operation.get("operationId") in REQUIRED_BODIES:
                operation["requestBody"]["required"] = True
    return result


def _drop_any_or_null(node: Any) -> None:
    """``oneOf: [{}, {type: null}]`` (drf-spectacular's nullable "any JSON") → any JSON: null
    matches both branches, so under OpenAPI 3.1 no value would be valid."""
    if isinstance(node, dict):
        if node.get("oneOf") == [{}, {"type": "null"}]:
            del node["oneOf"]
        for value in node.values():
            _drop_any_or_null(value)
    elif isinstance(node, list):
        for value in node:
            _drop_any_or_null(value)


def add_problem_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook (SPECTACULAR_SETTINGS['POSTPROCESSING_HOOKS'])."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status in _generic_statuses(operation):
                operation["responses"].setdefault(status, {
                    "description": _GENERIC[status], "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_REF}}})
    return result


def _generic_statuses(operation: dict[str, Any]) -> list[str]:
    where = {parameter.get("in") for parameter in operation.get("parameters", [])}
    statuses = ["401", "403", "429"]
    if "requestBody" in operation or "query" in where or "header" in where:
        statuses.append("400")
    if "path" in where:
        statuses.append("404")
    if "requestBody" in operation:
        statuses += ["413", "415"]
    return statuses
