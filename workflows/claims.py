"""Verifying a system actor's signed claim on the server (S15). The format is in
``workflows.signing``; what a verified actor may then touch is in ``workflows.sudo``.

A claim is accepted only if, in this order: its headers are complete and well formed; an
actor of that name is registered and active; the signature verifies with that actor's key
over this request's deployment (``SB_DEPLOYMENT_ID``), workspace (the token's), method, path,
body, timestamp, nonce and name; the timestamp is within
±``WINDOW_SECONDS`` of the *database* clock; and the nonce was never used — the nonce row is
inserted ``ON CONFLICT DO NOTHING`` under a UNIQUE constraint, so of two racing replays
exactly one wins. Every attempt, accepted or refused with its reason, is an audit row
(action ``claim``), written in autocommit: it survives whatever the request does next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from workflows import signing
from workflows.audit import record
from workflows.models import AuditEvent, SystemActor, Workspace
from workflows.sudo import VerifiedActor

WINDOW_SECONDS = 300
ACTION = "claim"

# Checks the window and spends the nonce in one statement, on the database clock: the nonce
# is inserted only for a timestamp inside the window; no row back means a replay.
SPEND_NONCE = """
    WITH clock AS (SELECT now() AS now),
    spent AS (
        INSERT INTO workflows_claimnonce (nonce, actor_id, claimed_at, created_at)
        SELECT %(nonce)s, %(actor)s, to_timestamp(%(timestamp)s), clock.now FROM clock
        WHERE abs(extract(epoch FROM clock.now) - %(timestamp)s) <= %(window)s
        ON CONFLICT (nonce) DO NOTHING
        RETURNING 1
    )
    SELECT extract(epoch FROM clock.now)::float8, EXISTS (SELECT 1 FROM spent) FROM clock
"""

# A nonce whose claim timestamp has left the window can go: a replay of it is refused as stale.
PRUNE_NONCES = """
    DELETE FROM workflows_claimnonce WHERE claimed_at < now() - make_interval(secs => %(window)s)
"""


class ClaimRefused(Exception):
    """A claim that was not accepted; the message is the reason (shown to the caller)."""


@dataclass(frozen=True)
class HttpRequest:
    """What a claim signs, as the server received it."""

    method: str
    path: str  # with the query string, if any
    body: bytes | None  # None: refused before the body was read (it is not hashed then)
    ip: str = ""  # the source address (REMOTE_ADDR)


def verify(header: Callable[[str], str | None], request: HttpRequest, *, workspace: Workspace,
           via: str) -> VerifiedActor | None:
    """The verified actor of the claim in ``header``, ``None`` when the request carries no
    claim; raises ``ClaimRefused`` with the reason otherwise. ``via`` names the credential the
    claim came with (``token:ci``), for the audit row."""
    try:
        claim = signing.parse(header)
    except signing.MalformedClaim as error:
        record_refusal(header, request, workspace=workspace, via=via, reason=str(error))
        raise ClaimRefused(str(error)) from error
    if claim is None:
        return None
    detail = _detail(request, via, claim.timestamp, claim.nonce)
    try:
        actor = _verified(claim, request, _scope(workspace))
    except ClaimRefused as refusal:
        record(f"actor:{claim.actor}", ACTION, workspace=workspace, target=_target(request),
               outcome=AuditEvent.Outcome.REFUSED, reason=str(refusal), detail=detail)
        raise
    record(f"actor:{claim.actor}", ACTION, workspace=workspace, target=_target(request), detail=detail)
    return actor


def record_refusal(header: Callable[[str], str | None], request: HttpRequest, *, workspace: Workspace | None,
                   via: str, reason: str) -> None:
    """Record a refused claim attempt that never reached verification (malformed headers, or
    refused credentials alongside it)."""
    name = header(signing.ACTOR) or ""
    actor = f"actor:{name}" if signing.ACTOR_NAME.fullmatch(name) else "actor:?"
    record(actor, ACTION, workspace=workspace, target=_target(request), outcome=AuditEvent.Outcome.REFUSED,
           reason=reason, detail=_detail(request, via, header(signing.TIMESTAMP), header(signing.NONCE)))


def deployment_id() -> str:
    return str(settings.SB["DEPLOYMENT_ID"])


def _scope(workspace: Workspace) -> signing.Scope:
    return signing.Scope(deployment_id(), workspace.slug)


def _verified(claim: signing.Claim, request: HttpRequest, scope: signing.Scope) -> VerifiedActor:
    actor = SystemActor.objects.filter(name=claim.actor).order_by("-active", "-created_at").first()
    if actor is None:
        raise ClaimRefused(f"no system actor '{claim.actor}' is registered")
    if not actor.active:
        raise ClaimRefused(f"system actor '{claim.actor}' is deactivated")
    if not signing.verifies(actor.public_key, claim, request.method, request.path, request.body or b"",
                            scope=scope):
        raise ClaimRefused(f"the signature does not verify with the registered key of system actor "
                           f"'{claim.actor}' (a forged or altered request, another key, or a claim signed for "
                           f"another deployment or workspace: this is deployment '{scope.deployment}', "
                           f"workspace '{scope.workspace}')")
    with connection.cursor() as cursor:
        cursor.execute(SPEND_NONCE, {"nonce": claim.nonce, "actor": actor.pk, "timestamp": claim.timestamp,
                                     "window": WINDOW_SECONDS})
        now, spent = cursor.fetchone()
        skew = claim.timestamp - now
        if abs(skew) > WINDOW_SECONDS:
            when = f"{skew:.0f} s in the future" if skew > 0 else f"{-skew:.0f} s old"
            raise ClaimRefused(f"the claim's timestamp is {when}; a claim is valid for {WINDOW_SECONDS} s either "
                               "side of the server's clock")
        if not spent:
            raise ClaimRefused(f"nonce '{claim.nonce}' was already used: a replayed claim")
        cursor.execute(PRUNE_NONCES, {"window": WINDOW_SECONDS})
    return VerifiedActor(actor.name, tuple(actor.patterns))


def _target(request: HttpRequest) -> str:
    return f"{request.method.upper()} {request.path}"


def _detail(request: HttpRequest, via: str, timestamp: Any, nonce: Any) -> dict[str, Any]:
    # Header values of a refused claim are whatever the caller sent: clipped, never trusted.
    def clip(value: Any) -> Any:
        return value[:200] if isinstance(value, str) else value

    digest = None if request.body is None else signing.body_digest(request.body)
    return {"via": via, "ip": request.ip, "body_sha256": digest, "timestamp": clip(timestamp), "nonce": clip(nonce)}
