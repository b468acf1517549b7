"""The one error hierarchy of both apps (a leaf module: it imports nothing from the project).

Services raise a ``ServiceError``; the API and the UI map its ``status`` to a 4xx response
(an RFC 9457 problem, a flash message). ``PermissionDenied`` is a role check that failed
(``Principal.require``); the API answers it with 403 too."""

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


class Gone(ServiceError):
    """It existed and is over for good (a callback token whose step timed out, was cancelled
    or retried)."""

    status, code = 410, "gone"


class Forbidden(ServiceError):
    status, code = 403, "forbidden"


class QuotaExceededError(ServiceError):
    status, code = 429, "quota-exceeded"


class PermissionDenied(Exception):
    """The principal's role does not allow the action (see workflows.access.Principal.require)."""
