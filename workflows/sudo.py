"""Reserved workflow keys (S15, the "sudo" pattern): the one rule every writer applies.

Keys matching ``SB["RESERVED_KEY_PATTERNS"]`` (default ``system.*``) belong to system
workflows. Publishing to one, starting it, and cancelling or retrying its executions needs a
*verified system actor* (a signed claim, see ``workflows.claims``) whose patterns cover the
key. Nobody else may — not a superuser, not an admin token, not ``manage.py`` commands. The
services call ``require``; the API, UI, admin and CLI therefore all get the same refusal.

The engine itself may start a reserved workflow (CHAIN, SPAWNER) only from an execution of
a reserved workflow: a system workflow may start system workflows, an ordinary one may not
(``require_engine_start``), so publishing an ordinary workflow cannot reach a system one.

The other way round, what a reserved workflow *depends on* must be reserved too
(``check_reserved_dependency``): it may call only reserved destinations (``system.*``
names, which only a verified system actor creates or changes, ``require_destination``) and
spawn or chain only to reserved workflows or to versions pinned by hash — otherwise an
operator could repoint its destination, or an author publish new logic that it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase

from django.conf import settings

from workflows.dsl import ast
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
    return _first_match(key, tuple(reserved_patterns()))


@functools.lru_cache(maxsize=4096)
def _first_match(key: str, patterns: tuple[str, ...]) -> str | None:
    # Cached: the engine asks for every HTTP call (engine._check_destination), with few keys.
    return next((pattern for pattern in patterns if fnmatchcase(key, pattern)), None)


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


# --- what reserved workflows depend on ----------------------------------------------------------

def require_destination(name: str, actor: VerifiedActor | None, doing: str) -> None:
    """Refuse ``doing`` (creating, changing) a reserved destination ``name`` unless ``actor`` is
    a verified system actor whose patterns cover it: reserved workflows call only these, so
    no operator, login or UI page may repoint or throttle them."""
    pattern = reserving_pattern(name)
    if pattern is None:
        return
    if actor is None:
        raise ReservedKeyDenied(
            f"destination '{name}' is reserved for system workflows (it matches '{pattern}'): {doing} it needs a "
            f"signed claim from a registered system actor (X-SB-* headers, {HELP}); no operator, login or UI "
            "page may, admins included")
    if not actor.covers(name):
        raise ReservedKeyDenied(
            f"system actor '{actor.name}' may not claim destination '{name}': its patterns "
            f"({', '.join(actor.patterns)}) do not cover it")


def check_reserved_dependency(workflow: str, *, destination: str | None = None, target: str | None = None,
                              pinned: bool = False) -> None:
    """Refuse a dependency of workflow ``workflow`` that a reserved workflow may not have: a
    ``destination`` that is not reserved, or a ``target`` workflow (SPAWNER, CHAIN) that is
    neither reserved nor ``pinned`` to a version by hash. Ordinary workflows pass. For the
    engine where a target or destination is resolved, and for publishing."""
    if not is_reserved(workflow):
        return
    if destination is not None and not is_reserved(destination):
        raise ReservedKeyDenied(
            f"reserved workflow '{workflow}' may call only reserved destinations ({_patterns()}), not "
            f"'{destination}': an operator could repoint or throttle it")
    if target is not None and not pinned and not is_reserved(target):
        raise ReservedKeyDenied(
            f"reserved workflow '{workflow}' may start only reserved workflows ({_patterns()}) or a version pinned "
            f"by hash, not the current version of '{target}': an author could publish new logic under it")


def check_reserved_dependencies(key: str, workflow: ast.Workflow) -> None:
    """At publish time: every problem of ``check_reserved_dependency`` in the document, with
    its JSON path (a 403 ``reserved-key``)."""
    problems = []
    for path, destination, target, pinned in _dependencies(workflow):
        try:
            check_reserved_dependency(key, destination=destination, target=target, pinned=pinned)
        except ReservedKeyDenied as refusal:
            problems.append({"path": path, "message": refusal.message})
    if problems:
        raise ReservedKeyDenied(f"reserved workflow '{key}' depends on what is not reserved: "
                                + "; ".join(problem["message"] for problem in problems), errors=problems)


def _dependencies(workflow: ast.Workflow) -> Iterator[tuple[str, str | None, str | None, bool]]:
    """``(json_path, destination, target, pinned)`` for each destination and started workflow."""
    for vertex_id, vertex in workflow.vertices.items():
        where = f"$.vertices.{vertex_id}"
        if isinstance(vertex, ast.WorkVertex) and vertex.destination_name is not None:
            yield f"{where}.destination", vertex.destination_name, None, False
        if isinstance(vertex, ast.Spawner):
            pinned = vertex.version is not None
            yield f"{where}.{'version' if pinned else 'workflow'}", None, vertex.workflow or "", pinned
        if isinstance(vertex, ast.Chain) and vertex.workflow != "self":  # "self" is this reserved workflow
            yield f"{where}.workflow", None, vertex.workflow, False


def _patterns() -> str:
    return ", ".join(reserved_patterns())
