"""One JSON problem format (RFC 9457 style) for every API error."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler


def problem_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    title = detail.get("detail") if isinstance(detail, dict) and "detail" in detail else "invalid request"
    response.data = {"type": "about:blank", "title": str(title), "status": response.status_code,
                     "errors": [] if isinstance(detail, dict) and "detail" in detail else detail}
    response["Content-Type"] = "application/problem+json"
    return response
