"""Destination bookkeeping: the call log behind the Rate Limits page's error rate and
latency (the page's reads are in selectors/destinations.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection
from django.db.models.functions import Now

log = logging.getLogger(__name__)

RECORD_CALL = """
    INSERT INTO executions_destinationcall (destination_id, step_id, status_code, ok, latency_ms, error, created_at)
    VALUES (%(destination)s, %(step)s, %(status)s, %(ok)s, %(latency)s, %(error)s, now())
"""

def record_call(destination_id: int, step_id: int, status_code: int | None, seconds: float, error: str) -> None:
    """Log one outbound call (its own short autocommit statement; never fails the step)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(RECORD_CALL, {
                "destination": destination_id, "step": step_id, "status": status_code,
                "ok": status_code is not None and status_code < 400, "latency": seconds * 1000.0,
                "error": error[:500],
            })
    except Exception:
        log.exception("could not record a call to destination %s", destination_id)


# --- writes -------------------------------------------------------------------------------------

EDITABLE = ("base_url", "timeout_seconds", "concurrency_limit", "rate_per_second")
MAX_URL = 500  # the column's length
MAX_LIMIT = 1_000_000
MAX_RATE = 1_000_000.0


def _validated(fields: dict[str, Any]) -> dict[str, Any]:
    """Check destination fields; raise Invalid naming every bad field."""
    from django.core.exceptions import ValidationError
    from django.core.validators import URLValidator

    from workflows.errors import Invalid

    errors: list[dict[str, str]] = []
    clean: dict[str, Any] = {}
    if "name" in fields:
        from workflows.dsl.parser import DESTINATION_NAME

        name = fields["name"]
        if not isinstance(name, str) or not DESTINATION_NAME.fullmatch(name):
            errors.append({"field": "name", "message": "1-100 letters, digits, '.', '_' or '-'"})
        clean["name"] = name
    if "base_url" in fields:
        try:
            URLValidator(schemes=["http", "https"])(fields["base_url"])
            if len(fields["base_url"]) > MAX_URL:
                raise ValidationError("too long")
            clean["base_url"] = str(fields["base_url"])
        except (ValidationError, TypeError):
            errors.append({"field": "base_url", "message": f"must be an http(s) URL of at most {MAX_URL} characters"})
    if "timeout_seconds" in fields:
        value = fields["timeout_seconds"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
            errors.append({"field": "timeout_seconds", "message": "must be a number of seconds in (0, 3600]"})
        else:
            clean["timeout_seconds"] = float(value)
    if "concurrency_limit" in fields:
        value = fields["concurrency_limit"]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LIMIT):
            errors.append({"field": "concurrency_limit",
                           "message": f"must be an integer from 0 to {MAX_LIMIT:,}, or empty (unlimited)"})
        else:
            clean["concurrency_limit"] = value
    if "rate_per_second" in fields:
        value = fields["rate_per_second"]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value <= MAX_RATE):
            errors.append({"field": "rate_per_second",
                           "message": f"must be a number in (0, {MAX_RATE:,}], or empty (no rate limit)"})
        else:
            clean["rate_per_second"] = None if value is None else float(value)
    if errors:
        raise Invalid("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors)
    return clean


def create_destination(workspace: Any, *, system_actor: Any = None, **fields: Any) -> Any:
    """Create a destination (name and base_url required). Raises Invalid or Conflict; a
    reserved name (``system.*``) needs a verified ``system_actor`` (``sudo.require_destination``)."""
    from django.db import IntegrityError, transaction

    from executions.models import Destination
    from workflows import sudo
    from workflows.errors import Conflict, Invalid

    missing = [name for name in ("name", "base_url") if fields.get(name) in (None, "")]
    if missing:
        raise Invalid(", ".join(f"{m}: required" for m in missing),
                      errors=[{"field": m, "message": "required"} for m in missing])
    sudo.require_destination(str(fields["name"]), system_actor, "creating")
    clean = _validated(fields)
    try:
        with transaction.atomic():
            return Destination.objects.create(workspace=workspace, **clean)
    except IntegrityError as error:
        raise Conflict(f"a destination named '{clean['name']}' already exists") from error


def update_destination(destination: Any, *, system_actor: Any = None, **fields: Any) -> Any:
    """Change a destination's editable fields. A new limit is effective at the next claim
    on every worker (slots are counted from RUNNING steps; nothing to restart). A reserved
    destination needs a verified ``system_actor`` (``sudo.require_destination``)."""
    from executions.models import Destination
    from workflows import sudo
    from workflows.errors import Invalid

    sudo.require_destination(destination.name, system_actor, "changing")

    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise Invalid(f"not editable: {', '.join(unknown)}",
                      errors=[{"field": f, "message": "not editable"} for f in unknown])
    clean = _validated(fields)
    if clean:
        Destination.objects.filter(pk=destination.pk).update(**clean, updated_at=Now())
        destination.refresh_from_db()
    return destination
