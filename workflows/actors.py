"""Writes for system actors (S15): register a public key, rotate it, deactivate it. Each
is audited. Private keys are never passed here: only public keys reach the server.

What a key may claim is fixed when it is registered (a trigger keeps name, key and patterns
as they were); changing an actor's patterns is a rotation with new patterns.

``register`` and ``rotate`` insert rows, which the database allows only inside
``manage.py sb_actor`` (a trigger checks a transaction-local flag that only that command
sets, ``workflows/management/commands/sb_actor.py``); called from anywhere else they raise
``ActorError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db import IntegrityError, ProgrammingError, transaction
from django.utils import timezone

from workflows import signing
from workflows.audit import record
from workflows.models import SystemActor

PATTERN = re.compile(r"[A-Za-z0-9._*?-]{1,128}")
INSUFFICIENT_PRIVILEGE = "42501"  # the insert guard's refusal (migration 0006)


class ActorError(Exception):
    pass


def clean_patterns(patterns: Iterable[str]) -> list[str]:
    """Glob patterns over workflow keys: 1-128 of letters, digits, '.', '_', '-', '*', '?'."""
    cleaned = [pattern.strip() for pattern in patterns if pattern.strip()]
    if not cleaned:
        raise ActorError("an actor needs at least one pattern (e.g. 'system.*')")
    bad = [pattern for pattern in cleaned if not PATTERN.fullmatch(pattern)]
    if bad:
        raise ActorError(f"not a key pattern: {', '.join(bad)} (letters, digits, '.', '_', '-', '*', '?')")
    return cleaned


def register(name: str, public_key: str, patterns: Iterable[str], *, by: str) -> SystemActor:
    """Register a new actor with its public key (raw base64 or PEM)."""
    with transaction.atomic():
        actor = _insert(name, public_key, clean_patterns(patterns), by)
        record(by, "actor.register", target=name, detail=_describe(actor))
    return actor


def rotate(name: str, public_key: str, *, by: str, patterns: Iterable[str] | None = None) -> SystemActor:
    """Replace the active key of ``name`` with a new one (and, optionally, new patterns):
    the old row is deactivated and the new one registered in one transaction, so claims
    signed with the old key are refused from the commit on."""
    with transaction.atomic():
        old = SystemActor.objects.select_for_update().filter(name=name, active=True).first()
        if old is None:
            raise ActorError(f"no active system actor '{name}' to rotate")
        _deactivate(old)
        actor = _insert(name, public_key, clean_patterns(patterns if patterns is not None else old.patterns), by)
        record(by, "actor.rotate", target=name, detail={**_describe(actor), "replaced": signing.fingerprint(
            old.public_key)})
    return actor


def deactivate(actor: SystemActor, *, by: str) -> bool:
    """Deactivate ``actor``'s key for good; ``False`` if it already was."""
    with transaction.atomic():
        changed = _deactivate(actor)
        if changed:
            record(by, "actor.deactivate", target=actor.name, detail=_describe(actor))
    return changed


def _insert(name: str, public_key: str, patterns: list[str], by: str) -> SystemActor:
    if not signing.ACTOR_NAME.fullmatch(name):
        raise ActorError(f"'{name}' is not an actor name (1-100 letters, digits, '.', '_', '-')")
    try:
        stored = signing.public_text(signing.load_public(public_key))
    except ValueError as error:
        raise ActorError(str(error)) from error
    try:
        with transaction.atomic():
            return SystemActor.objects.create(name=name, public_key=stored, patterns=patterns, created_by=by)
    except ProgrammingError as error:
        if getattr(error.__cause__, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
            raise ActorError(str(error.__cause__).splitlines()[0]) from error
        raise
    except IntegrityError as error:
        if SystemActor.objects.filter(public_key=stored).exists():
            raise ActorError("this public key is already registered (keys are never reused)") from error
        raise ActorError(f"system actor '{name}' already has an active key; rotate it instead") from error


def _deactivate(actor: SystemActor) -> bool:
    return bool(SystemActor.objects.filter(pk=actor.pk, active=True)
                .update(active=False, deactivated_at=timezone.now()))


def _describe(actor: SystemActor) -> dict[str, object]:
    return {"patterns": list(actor.patterns), "key": signing.fingerprint(actor.public_key)}
