"""Schedules: start a workflow on a cron schedule. The one home of their rules, their writes
and their firing.

- **Rules.** ``validated`` checks each field (name, workflow, cron, timezone, input,
  catch_up, enabled) and reports every bad one with one message; the API, the admin and the
  tests see the same messages. A cron expression has the five standard fields (minute hour
  day-of-month month day-of-week) or is an alias such as ``@hourly``; fire times are computed
  by ``croniter`` in the schedule's IANA time zone (``zoneinfo``), so they follow daylight
  saving time: a wall-clock time that does not exist that day fires at the first moment after
  it, one that happens twice fires at each instant.
- **Writes.** ``create_schedule``, ``update_schedule``, ``delete_schedule``. A schedule of a
  reserved workflow (S15) needs a verified system actor, like starting one does; its fires
  start the workflow as that actor while the actor stays active and covers the key.
- **Firing.** ``fire_due`` runs from the worker's tick (every minute) and when a worker
  process starts. It claims one due schedule at a time (``FOR UPDATE SKIP LOCKED``), starts
  its due fire times and moves ``next_run_at`` past ``now``, all in one transaction. Each
  start's idempotency key is ``schedule:<name>:<fire time, ISO UTC>``, unique per workspace,
  so a fire time starts at most one execution whatever the number of workers, restarts or
  ticks. Time is the database's (``now()``) unless a test passes ``now``.

Missed fire times (the workers were down, or the tick was late):

- ``catch_up`` true: every missed fire time runs once, oldest first, but at most the
  ``CATCH_UP_LIMIT`` most recent ones; older ones are skipped.
- ``catch_up`` false: only the most recent due fire time runs, and only if it is at most
  ``ON_TIME_SECONDS`` old (a normal tick's lateness); every other missed one is skipped.

A fire time whose start is refused (no published version, quota used up, reserved workflow
without its actor) is skipped too; ``last_error`` says why, and the next fire time is tried.
A schedule whose stored cron or time zone the rules refuse now (saved by an older release, or
written around this module: croniter reads ``5-5`` as every minute) fires nothing: it is
paused with the reason in ``last_error``.
"""

from __future__ import annotations

import functools
import json
import logging
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import JSONField, Value

from executions.core import payloads, priorities, starts
from executions.models import Schedule
from executions.services import cron, uploads
from workflows import fields as field_rules
from workflows import sudo
from workflows.dsl.parser import DESTINATION_NAME, WORKFLOW_KEY
from workflows.errors import Conflict, Invalid, NotFound, ServiceError
from workflows.fields import Bad
from workflows.models import SystemActor, WorkflowDefinition, Workspace

log = logging.getLogger(__name__)

CATCH_UP_LIMIT = 10  # missed fire times a catch-up schedule runs after downtime (the most recent)
ON_TIME_SECONDS = 120  # a fire time at most this old still runs for a schedule without catch-up
MAX_INPUT_BYTES = 1024 * 1024  # a schedule's input as JSON
MAX_CRON = 200  # the column's length

NAME = DESTINATION_NAME  # 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit
FIELDS = ("name", "workflow", "cron", "timezone", "input", "catch_up", "enabled", "priority")
REQUIRED = ("name", "workflow", "cron")
EDITABLE = ("cron", "timezone", "input", "catch_up", "enabled", "priority")

RULES = {
    "name": "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
    "workflow": "the key of a workflow in this workspace",
    "cron": "a cron expression: five fields (minute hour day-of-month month day-of-week), each '*', a value, "
            "a range low-high (low below high) or a list of them, each optionally with /step, months and days "
            "also by name; or an alias such as @hourly, @daily, @weekly, @monthly",
    "timezone": "an IANA time zone name such as UTC or Europe/Berlin",
    "input": f"any JSON value of at most {MAX_INPUT_BYTES:,} bytes; each execution starts with it",
    "catch_up": "true or false: after downtime, run each missed fire time once (at most "
                f"{CATCH_UP_LIMIT}, the most recent), or skip them",
    "enabled": "true or false; false pauses the schedule",
    "priority": "an integer from 1 (first) to 5: the priority of the executions it starts",
}
ALIASES = cron.ALIASES
# The same rules as JSON Schema, for the API's schema (``input``: any storable JSON, the API's own).
SCHEMAS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": f"^{NAME.pattern}$"},
    "workflow": {"type": "string", "pattern": f"^{WORKFLOW_KEY.pattern}$"},
    "cron": {"type": "string", "maxLength": MAX_CRON, "pattern": cron.PATTERN},
    "catch_up": {"type": "boolean"},
    "enabled": {"type": "boolean"},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
}


@functools.cache
def time_zone_pattern() -> str:
    """The time zone names this host's zone database knows, but the host's own setting, as one
    pattern grouped by area (``^(?:Africa/(?:Abidjan|…)|…|UTC|…)$``): a schema's ``enum`` of
    600 names would do, but fuzzers try every member of an enum."""
    areas: dict[str, list[str]] = {}
    for name in sorted(zoneinfo.available_timezones() - HOST_ZONES):
        area, _, rest = name.partition("/")
        areas.setdefault(area if rest else "", []).append(rest or name)
    def plain(name: str) -> str:  # names hold letters, digits, '_', '-', '+' and '/'; only '+' is special
        return name.replace("+", r"\+")
    groups = [f"{plain(area)}/(?:{'|'.join(map(plain, names))})" if area else "|".join(map(plain, names))
              for area, names in areas.items()]
    return f"^(?:{'|'.join(groups)})$"


def _must(field: str) -> Bad:
    return Bad(f"must be {RULES[field]}")


def _name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise _must("name")
    return value


def _workflow(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 128 or not WORKFLOW_KEY.fullmatch(value):
        raise _must("workflow")
    return value


def _cron(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_CRON or not value.isascii():
        raise _must("cron")
    text = " ".join(value.split())
    if text.lower() in ALIASES:
        return text.lower()
    if len(text.split(" ")) != 5:
        raise Bad(f"must have five fields (minute hour day-of-month month day-of-week), not "
                   f"{len(text.split())}; or be one of {', '.join(ALIASES)}")
    backwards = _backward_range(text)
    if backwards:
        raise Bad(f"has a range that {backwards} (write it low-high, or as a list)")
    if not cron.GRAMMAR.fullmatch(value):
        unreadable = cron.unreadable_field(text.split(" "))
        raise Bad(f"is not a valid cron expression: {unreadable}" if unreadable else f"must be {RULES['cron']}")
    try:
        croniter(text, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (ValueError, KeyError, OverflowError) as error:  # croniter's errors are ValueErrors
        raise Bad(f"is not a valid cron expression: {error}") from error
    return text


def _backward_range(text: str) -> str:
    """How the first range ``a-b`` with ``a >= b`` goes wrong (croniter reads ``1-0`` as
    something else than the author meant, and ``5-5`` as every value), with its field; empty
    if none."""
    for field, part in zip(cron.FIELDS, text.split(" "), strict=True):
        for item in part.split(","):
            low, dash, high = item.split("/", 1)[0].partition("-")
            if not dash:
                continue
            bounds = [int(v) if v.isdigit() else cron.NAMES.get(v.lower()) for v in (low, high)]
            if None in bounds:
                continue
            if bounds[0] > bounds[1]:  # type: ignore[operator]  # both ints here
                return f"runs backwards: {field} {item}"
            if bounds[0] == bounds[1]:
                return f"holds one value: {field} {item} (write {low})"
    return ""


# Names the zone database resolves from the host's own settings, so a schedule would fire at
# other times on another host.
HOST_ZONES = frozenset({"localtime", "posixrules"})


def _timezone(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64 or not value.isascii():
        raise _must("timezone")
    if value in HOST_ZONES:
        raise Bad(f"{value!r} depends on the host's settings; use an IANA name such as UTC or Europe/Berlin")
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise Bad(f"is not a known time zone: {value!r} (use an IANA name such as UTC or Europe/Berlin)") from error
    return value


def _input(value: Any) -> Any:
    if uploads.placements(value):
        raise Bad('cannot name an upload ({"$upload": …}): a schedule starts with the same input at every fire '
                  "and an upload is deleted after SB_UPLOAD_RETENTION_SECONDS; put the list itself in the input")
    try:
        text = payloads.encode(value)
    except payloads.PayloadError as error:
        raise Bad(f"is {error}") from error
    if len(text.encode()) > MAX_INPUT_BYTES:
        raise Bad(f"must be at most {MAX_INPUT_BYTES:,} bytes as JSON")
    return value


def _flag(field: str) -> Any:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise _must(field)
        return value
    return check


def _priority(value: Any) -> int:
    if priorities.problem(value) is not None:
        raise _must("priority")
    return int(value)


CHECKS = {"name": _name, "workflow": _workflow, "cron": _cron, "timezone": _timezone, "input": _input,
          "catch_up": _flag("catch_up"), "enabled": _flag("enabled"), "priority": _priority}


def validated(fields: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The clean values of ``fields``; raises Invalid naming every bad, unknown or missing
    field, each with one message. The cron expression is checked in the time zone given."""
    return field_rules.validated(fields, CHECKS, required=required)


# --- fire times ----------------------------------------------------------------------------------

def next_after(cron: str, tz: str, moment: datetime) -> datetime:
    """The first fire time strictly after ``moment``, in UTC."""
    local = moment.astimezone(zoneinfo.ZoneInfo(tz))
    return croniter(cron, local).get_next(datetime).astimezone(UTC)


def due_times(cron: str, tz: str, *, since: datetime, now: datetime, limit: int) -> list[datetime]:
    """Fire times in ``[since, now]``, oldest first: the ``limit`` most recent ones. Walks
    backwards from ``now``, so a year of downtime costs ``limit`` steps, not a year's worth."""
    zone = zoneinfo.ZoneInfo(tz)
    after_now = croniter(cron, now.astimezone(zone)).get_next(datetime)
    walk = croniter(cron, after_now)
    found: list[datetime] = []
    while len(found) < limit:
        moment = walk.get_prev(datetime).astimezone(UTC)
        if moment < since:
            break
        found.append(moment)
    return found[::-1]


def idempotency_key(name: str, fire_time: datetime) -> str:
    """``schedule:<name>:<fire time ISO UTC>``: what makes a fire time start at most once."""
    return f"{starts.SCHEDULE_KEY_PREFIX}{name}:{fire_time.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def created_by(name: str) -> str:
    return f"schedule:{name}"


# --- writes ---------------------------------------------------------------------------------------

DB_NOW = "SELECT now()"


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute(DB_NOW)
        return cursor.fetchone()[0]


def _definition(workspace: Workspace, key: str) -> WorkflowDefinition:
    found = WorkflowDefinition.objects.filter(workspace=workspace, key=key).first()
    if found is None:
        raise NotFound(f"workflow: no workflow '{key}' in this workspace",
                      errors=[{"field": "workflow", "message": f"no workflow '{key}' in this workspace"}])
    return found


def _actor_name(key: str, system_actor: sudo.VerifiedActor | None, doing: str) -> str:
    """Refuse ``doing`` a schedule of a reserved workflow without a covering actor; the
    actor's name to store (empty for an ordinary workflow)."""
    sudo.require(key, system_actor, doing)
    return system_actor.name if system_actor is not None and sudo.is_reserved(key) else ""


def create_schedule(workspace: Workspace, *, by: str = "", system_actor: sudo.VerifiedActor | None = None,
                    now: datetime | None = None, **fields: Any) -> Schedule:
    """Create a schedule (name, workflow and cron required; timezone UTC, input ``{}``,
    catch_up false, enabled true by default). Its first fire time is the first after now.
    Raises Invalid, Conflict (the name is taken) or ReservedKeyDenied."""
    clean = validated(fields, required=REQUIRED)
    definition = _definition(workspace, clean.pop("workflow"))
    actor = _actor_name(definition.key, system_actor, "scheduling")
    clean.setdefault("timezone", "UTC")
    clean["input"] = _json(clean.get("input", {}))
    enabled = clean.setdefault("enabled", True)
    next_run_at = next_after(clean["cron"], clean["timezone"], now or db_now()) if enabled else None
    try:
        with transaction.atomic():
            created = Schedule.objects.create(workspace=workspace, workflow=definition, next_run_at=next_run_at,
                                              system_actor=actor, created_by=by, **clean)
    except IntegrityError as error:
        if _constraint(error) != UNIQUE_NAME:
            raise
        raise Conflict(f"a schedule named '{clean['name']}' already exists",
                       errors=[{"field": "name", "message": "already exists in this workspace"}]) from error
    created.refresh_from_db(fields=["input", "created_at", "updated_at"])
    return created


UNIQUE_NAME = "schedule_unique_name"


def _constraint(error: IntegrityError) -> str | None:
    return getattr(getattr(error.__cause__, "diag", None), "constraint_name", None)


def _json(value: Any) -> Any:
    """``value`` for the input column: JSON null is a JSON value here, not SQL NULL."""
    return Value(None, JSONField()) if value is None else value


def update_schedule(schedule: Schedule, *, system_actor: sudo.VerifiedActor | None = None,
                    now: datetime | None = None, **fields: Any) -> Schedule:
    """Change a schedule's cron, timezone, input, catch_up or enabled. A new cron or time
    zone, or resuming, moves the next fire time to the first one after now (fire times missed
    while paused are not caught up); pausing clears it. Raises Invalid or ReservedKeyDenied."""
    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise Invalid("; ".join(f"{name}: cannot be changed" for name in unknown),
                      errors=[{"field": name, "message": "cannot be changed"} for name in unknown])
    clean = validated(fields)
    actor = _actor_name(schedule.workflow.key, system_actor, "changing a schedule of")
    with transaction.atomic():
        current = Schedule.objects.select_for_update().get(pk=schedule.pk)
        timing, was_enabled = (current.cron, current.timezone), current.enabled
        for field, value in clean.items():
            setattr(current, field, _json(value) if field == "input" else value)
        # Only a change of timing moves the next fire time: repeating the same cron or zone
        # keeps a fire time that is due now (it would be dropped).
        retimed = (current.cron, current.timezone) != timing or (current.enabled and not was_enabled)
        if not current.enabled:
            current.next_run_at = None
        elif retimed or current.next_run_at is None:
            current.next_run_at = next_after(current.cron, current.timezone, now or db_now())
        current.system_actor = actor
        current.updated_at = db_now()
        # Only what changed: an input read back as JSON null is None, which would be saved as SQL NULL.
        current.save(update_fields=[*clean, "next_run_at", "system_actor", "updated_at"])
    current.refresh_from_db(fields=["input"])
    return current


def delete_schedule(schedule: Schedule, *, system_actor: sudo.VerifiedActor | None = None) -> None:
    """Delete a schedule; executions it started stay. A reserved workflow's needs its actor."""
    sudo.require(schedule.workflow.key, system_actor, "deleting a schedule of")
    schedule.delete()


# --- firing ---------------------------------------------------------------------------------------

# One due schedule, locked; another worker skips it (SKIP LOCKED: it would only wait to find
# the fire times started) and takes the next due one. The partial index schedule_due serves it.
CLAIM_DUE = """
    SELECT s.id, s.workspace_id, s.name, s.workflow_id, d.key, s.cron, s.timezone, s.input::text, s.catch_up,
           s.next_run_at, s.system_actor, coalesce(%(now)s::timestamptz, now()), s.priority
    FROM executions_schedule s JOIN workflows_workflowdefinition d ON d.id = s.workflow_id
    WHERE s.enabled AND s.next_run_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY s.next_run_at
    LIMIT 1
    FOR UPDATE OF s SKIP LOCKED
"""

# Move a fired schedule on (in the transaction that started its executions).
ADVANCE = """
    UPDATE executions_schedule
    SET next_run_at = %(next)s, last_run_at = coalesce(%(last)s, last_run_at),
        last_execution_id = coalesce(%(execution)s, last_execution_id), last_error = %(error)s
    WHERE id = %(id)s
"""

# Pause a schedule whose stored timing the rules refuse (see _refused_timing).
PAUSE_REFUSED = """
    UPDATE executions_schedule SET enabled = false, next_run_at = NULL, last_error = %(error)s WHERE id = %(id)s
"""


@dataclass(frozen=True)
class _Due:
    id: int
    workspace_id: int
    name: str
    workflow_id: int
    workflow_key: str
    cron: str
    timezone: str
    input: Any
    catch_up: bool
    next_run_at: datetime
    system_actor: str
    now: datetime
    priority: int


def fire_due(now: datetime | None = None) -> int:
    """Start the due fire times of every due schedule (one transaction each, until none is
    due: a schedule left for the next tick would miss its fire time); returns how many
    executions were started (a fire time started before counts 0). ``now`` replaces the
    database clock (tests)."""
    started = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(CLAIM_DUE, {"now": now})
            row = cursor.fetchone()
            if row is None:
                break
            due = _Due(row[0], row[1], row[2], row[3], row[4], row[5], row[6], json.loads(row[7]), row[8], row[9],
                       row[10], row[11], row[12])
            started += _fire(cursor, due)
    return started


def to_run(due: _Due) -> list[datetime]:
    """The fire times of ``due`` that start an execution now (see the module doc)."""
    if due.catch_up:
        return due_times(due.cron, due.timezone, since=due.next_run_at, now=due.now, limit=CATCH_UP_LIMIT)
    latest = due_times(due.cron, due.timezone, since=due.next_run_at, now=due.now, limit=1)
    return [t for t in latest if due.now - t <= timedelta(seconds=ON_TIME_SECONDS)]


def _skipped(due: _Due, runs: list[datetime]) -> str:
    """Why due fire times before the first one that runs (or all, if none runs) start
    nothing: empty when none was skipped."""
    until = runs[0] - timedelta(microseconds=1) if runs else due.now
    latest = due_times(due.cron, due.timezone, since=due.next_run_at, now=until, limit=1)
    if not latest:
        return ""
    why = (f"only the {CATCH_UP_LIMIT} most recent missed fire times are caught up" if due.catch_up
           else f"catch_up is off and a missed fire time runs only within {ON_TIME_SECONDS} s")
    return (f"skipped the missed fire times from {due.next_run_at.isoformat()} to {latest[0].isoformat()}: "
            f"{why}")


def _refused_timing(due: _Due) -> str:
    """Why the stored cron or time zone of ``due`` is one the rules refuse now (saved by an
    older release, or written around this service), for last_error; empty if it is fine."""
    try:
        validated({"cron": due.cron, "timezone": due.timezone})
    except Invalid as refused:
        return "; ".join(f"{error['field']} {error['message']}" for error in refused.errors)
    return ""


def _fire(cursor: Any, due: _Due) -> int:
    bad_timing = _refused_timing(due)
    if bad_timing:
        # croniter would still compute fire times (``5-5`` as every minute): fire nothing,
        # pause the schedule, and say why; resuming it with a valid cron and time zone works.
        error = (f"{bad_timing}: paused; no fire time starts until the schedule is saved with a cron and time zone "
                 "the rules accept and resumed")
        log.warning("schedule %s: %s", due.name, error)
        cursor.execute(PAUSE_REFUSED, {"id": due.id, "error": error[:2000]})
        return 0
    actor = _verified_actor(due.system_actor)
    runs = to_run(due)
    started, last, execution, error = 0, None, None, _skipped(due, runs)
    if due.system_actor and actor is None:
        error = (f"system actor '{due.system_actor}' is deactivated or removed: the fires of reserved workflow "
                 f"'{due.workflow_key}' need an active system actor covering it; none is started until its "
                 f"schedule is saved again by one (docs/security.md)")
        runs = []
    for fire_time in runs:
        try:
            with transaction.atomic():  # a savepoint: a refused start leaves nothing behind
                execution_id, created = starts.start_in(
                    cursor, workspace_id=due.workspace_id, input=due.input, definition_id=due.workflow_id,
                    idempotency_key=idempotency_key(due.name, fire_time), created_by=created_by(due.name),
                    system_actor=actor, priority=due.priority)
        except ServiceError as refused:
            error = f"{fire_time.isoformat()}: {refused.message}"[:2000]
            log.warning("schedule %s: fire time %s not started: %s", due.name, fire_time, refused.message)
            continue
        except (OperationalError, InterfaceError):
            raise  # the connection is gone: nothing was written; the next tick tries again
        except Exception as broken:
            # A fault of this schedule's start must not hold up the schedules due after it
            # (it would be claimed first again at every tick): skip the fire time, say why.
            error = f"{fire_time.isoformat()}: {type(broken).__name__}: {broken}"[:2000]
            log.exception("schedule %s: fire time %s could not be started", due.name, fire_time)
            continue
        started += created
        last, execution = fire_time, execution_id
    following = next_after(due.cron, due.timezone, due.now)
    cursor.execute(ADVANCE, {"id": due.id, "next": following, "last": last, "execution": execution, "error": error})
    return started


def _verified_actor(name: str) -> sudo.VerifiedActor | None:
    """The schedule's system actor as it is now: None once deactivated (its fires are then
    refused, like its requests would be)."""
    if not name:
        return None
    actor = SystemActor.objects.filter(name=name, active=True).first()
    return sudo.VerifiedActor(actor.name, tuple(actor.patterns)) if actor is not None else None
