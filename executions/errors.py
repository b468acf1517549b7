"""Domain errors raised by services; the API and UI map ``status`` to a 4xx response."""

from __future__ import annotations


class ServiceError(Exception):
    status = 400
    code = "invalid"

    def __init__(self, message: str, *, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []


class Invalid(ServiceError):
    status, code = 400, "invalid"


class NotFound(ServiceError):
    status, code = 404, "not-found"


class Conflict(ServiceError):
    status, code = 409, "conflict"


class Forbidden(ServiceError):
    status, code = 403, "forbidden"


class QuotaExceededError(ServiceError):
    status, code = 429, "quota-exceeded"
