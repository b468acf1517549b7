"""One JSON problem format (RFC 9457 style) for every API error.

Every 4xx body looks like::

    {"type": "about:blank", "title": "Bad Request", "status": 400, "code": "invalid",
     "detail": "2 problems in the request",
     "errors": [{"field": "input", "message": "..."}, {"path": "$.vertices.a.next", "message": "..."}]}

``field`` names a body field, query parameter or header; ``path`` is a JSON path into the
submitted document. Exceptions that are not ours (bugs) are left to Django, so they stay
visible as 500s instead of being dressed up as client errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from workflows.dsl import DslError
from workflows.errors import PermissionDenied as RoleDenied
from workflows.errors import ServiceError

PROBLEM_MEDIA_TYPE = "application/problem+json"

# The codes of the errors DRF raises itself (validation errors are handled apart).
_CODES = {
    400: "malformed-request",
    401: "not-authenticated",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    413: "payload-too-large",
    415: "unsupported-media-type",
    429: "throttled",
}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "payload-too-large"


class BadRequest(exceptions.APIException):
    """A request the API itself refuses before any service runs (bad header, bad cursor)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, message: str, *, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def problem(status_code: int, detail: str, *, code: str, errors: list[dict[str, Any]] | None = None,
            headers: dict[str, str] | None = None) -> Response:
    body = {"type": "about:blank", "title": HTTPStatus(status_code).phrase, "status": status_code,
            "code": code, "detail": detail, "errors": errors or []}
    return Response(body, status=status_code, headers=headers, content_type=PROBLEM_MEDIA_TYPE)


def problem_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # rest_framework.views loads the API's parser class, which imports this module: imported here,
    # it cannot form a cycle whichever module is imported first.
    from rest_framework.views import set_rollback

    response = _problem_for(exc, context)
    if response is not None:
        set_rollback()
    return response


def _problem_for(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DslError):
        return problem(400, _count(len(exc.errors), "problem") + " in the workflow document",
                       code="invalid-workflow", errors=[_located(path, message) for path, message in exc.errors])
    if isinstance(exc, ServiceError):
        return problem(exc.status, exc.message, code=exc.code, errors=list(exc.errors))
    if isinstance(exc, RoleDenied):
        return problem(403, str(exc), code="forbidden")
    if isinstance(exc, RequestDataTooBig):
        return problem(413, "the request body is too large", code="payload-too-large")
    if isinstance(exc, BadRequest):
        return problem(400, str(exc.detail), code="invalid", errors=exc.errors)
    if isinstance(exc, exceptions.ValidationError):
        errors = list(_field_errors(exc.detail))
        return problem(400, _count(len(errors), "problem") + " in the request", code="invalid", errors=errors)
    return _from_drf(exc, context)


def _from_drf(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Reuse DRF's handling (404s, WWW-Authenticate, Retry-After) and reshape its body."""
    from rest_framework.views import exception_handler  # see problem_handler

    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data.get("detail", "") if isinstance(response.data, dict) else ""
    if isinstance(exc, Http404):
        detail = "not found"
    headers = {name: value for name, value in response.items() if name in ("WWW-Authenticate", "Retry-After")}
    return problem(response.status_code, str(detail) or HTTPStatus(response.status_code).phrase,
                   code=_CODES.get(response.status_code, "error"), headers=headers)


def _located(where: str, message: str) -> dict[str, str]:
    return {"path" if where.startswith("$") else "field": where, "message": message}


def _field_errors(detail: Any, prefix: str = "") -> Iterator[dict[str, str]]:
    """Flatten DRF's nested error structure into ``{"field": "a.b.0", "message": …}`` items."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            yield from _field_errors(value, f"{prefix}.{name}" if prefix and name else prefix or name)
    elif isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        for index, item in enumerate(detail):
            if item:
                yield from _field_errors(item, f"{prefix}.{index}" if prefix else str(index))
    elif isinstance(detail, list):
        for item in detail:
            yield _message(prefix, item)
    else:
        yield _message(prefix, detail)


def _message(field: str, message: Any) -> dict[str, str]:
    return {"field": field, "message": str(message)} if field else {"message": str(message)}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
