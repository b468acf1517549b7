"""Reserved workflow keys (S15, the "sudo" pattern): the one rule every writer applies.

Keys matching ``SB["RESERVED_KEY_PATTERNS"]`` (default ``system.*``) belong to system
workflows. Publishing to one, starting it, and cancelling or retrying its executions needs a
*verified system actor* (a signed claim, see ``workflows.claims``) whose patterns cover the
key. Nobody else may — not a superuser, not an admin token, not ``manage.py`` commands. The
services call ``require``; the API, UI, admin and CLI therefore all get the same refusal.

The engine itself may start a reserved workflow (CHAIN, SPAWNER) only from an execution of
a reserved workflow: a system workflow may start system workflows, an ordinary one may not
(``require_engine_start``), so publishing an ordinary workflow cannot reach a system one.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from django.conf import settings

from workflows.errors import Forbidden, PermissionDenied

HELP = "see docs/security.md"


class ReservedKeyDenied(Forbidden, PermissionDenied):
    """A refusal under the reserved-key rule: a 403 (``reserved-key``) in the API, a message
    in the UI and admin, a CommandError in commands, a failed step in the engine."""

    code = "reserved-key"


@dataclass(frozen=True)
class VerifiedActor:
    """A system actor whose claim on the current request was verified (signature, active
    key, time window, fresh nonce)."""

    name: str
    patterns: tuple[str, ...]

    def covers(self, key: str) -> bool:
        return any(fnmatchcase(key, pattern) for pattern in self.patterns)


def reserved_patterns() -> list[str]:
    return list(settings.SB["RESERVED_KEY_PATTERNS"])


def reserving_pattern(key: str) -> str | None:
    """The reserved pattern ``key`` matches, if any."""
    return next((pattern for pattern in reserved_patterns() if fnmatchcase(key, pattern)), None)


def is_reserved(key: str) -> bool:
    return reserving_pattern(key) is not None


def require(key: str, actor: VerifiedActor | None, doing: str) -> None:
    """Refuse ``doing`` (e.g. "publishing to", "starting") a reserved ``key`` unless ``actor``
    is a verified system actor whose patterns cover it. Ordinary keys pass."""
    pattern = reserving_pattern(key)
    if pattern is None:
        return
    if actor is None:
        raise ReservedKeyDenied(
            f"workflow '{key}' is reserved for system actors (it matches '{pattern}'): {doing} it needs a "
            f"signed claim from a registered system actor (X-SB-* headers, {HELP}); no login or API token "
            "may, superusers and admins included")
    if not actor.covers(key):
        raise ReservedKeyDenied(
            f"system actor '{actor.name}' may not claim '{key}': its patterns ({', '.join(actor.patterns)}) "
            "do not cover it")


def require_engine_start(target: str, starter: str | None, how: str) -> None:
    """Refuse an engine-internal start (``how``: CHAIN, SPAWNER) of a reserved ``target``
    from an execution of the ordinary workflow ``starter``."""
    if not is_reserved(target) or (starter is not None and is_reserved(starter)):
        return
    raise ReservedKeyDenied(
        f"{how} of workflow '{starter}' may not start '{target}': it is a reserved system workflow, and only "
        f"a system workflow may start one from inside the engine ({HELP})")
