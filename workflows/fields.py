"""Checking the fields of a write (a destination, a schedule): every bad, unknown or missing
field is reported at once, each with one message, as an ``Invalid`` the API and the UI show
unchanged (a 400 naming each field)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from workflows.errors import Invalid


class Bad(ValueError):
    """Raised by a field's check: the message says what the field must be."""


def validated(fields: Mapping[str, Any], checks: Mapping[str, Callable[[Any], Any]], *,
              required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The clean values of ``fields`` (each through its check); raises Invalid naming every
    bad, unknown or missing (``required`` and empty) field."""
    errors: list[dict[str, str]] = []
    clean: dict[str, Any] = {}
    for field in required:
        if fields.get(field) in (None, ""):
            errors.append({"field": field, "message": "required"})
    for field, value in fields.items():
        if field in required and value in (None, ""):
            continue
        check = checks.get(field)
        if check is None:
            errors.append({"field": field, "message": "unknown field"})
            continue
        try:
            clean[field] = check(value)
        except Bad as error:
            errors.append({"field": field, "message": str(error)})
    if errors:
        raise Invalid("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors)
    return clean
