"""Who is calling: ``Authorization: Token <secret>`` or the UI's own browser session, both
resolved to a workspace ``Principal`` that becomes ``request.user``.

Role checks are not here: each write checks its role inside its audit block, so refused
attempts are recorded with their reason.

A request may also carry a system actor's signed claim (``X-SB-*`` headers, S15). It must
come with a token; once verified (``workflows.claims``) the token's principal acts for the
actor, which is what reserved workflows need (``workflows.sudo``). A refused claim refuses
the whole request (403 ``claim-refused``), whatever it was for. Nothing is written for a
request without valid credentials; refused claims of authenticated ones are audited (with
the source IP) and rate-limited per credential.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from workflows import claims, logins, signing, throttle
from workflows.access import Principal, principal_for_session, principal_for_token
from workflows.errors import Forbidden


class TokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Principal, Principal] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() != self.keyword.lower():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("the Authorization header must be 'Token <secret>'")
        principal = principal_for_token(header[1])
        if principal is None:
            # Counted per source IP; past the limit the answer is 429 (a valid token never is).
            over = logins.blocked(request, "token-auth")
            if over is not None:
                raise exceptions.Throttled(wait=over.seconds_left, detail=f"too many failed token authentications "
                                           f"from this address ({over.hits}); SB_AUTH_FAILURES_LIMIT")
            logins.failed(request, "token-auth")
            raise exceptions.AuthenticationFailed("unknown, revoked or expired token")
        return (principal, principal)

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class SessionAuthentication(authentication.SessionAuthentication):
    """The logged-in user's principal in their workspace (CSRF enforced, as for any session)."""

    def authenticate(self, request: Any) -> tuple[Principal, None] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        principal = principal_for_session(result[0], request.session)
        if principal is None:
            raise exceptions.PermissionDenied("this account is not a member of any workspace")
        return (principal, None)


class HasPrincipal(permissions.BasePermission):
    """Any role may read; writes check their own role (see the module docstring)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal)


# --- signed claims of system actors (S15) -------------------------------------------------------

CLAIM_WITHOUT_CREDENTIAL = (
    "a system actor's claim must accompany an API token (Authorization: Token …): the token "
    "gives the workspace and role, the claim lets it touch reserved workflows")
REFUSAL_WINDOW = 60  # seconds: refused claims are counted per credential per minute


class ClaimRefusedError(Forbidden):
    code = "claim-refused"


def refuse_claim_without_token(request: Request) -> None:
    """Right after authentication, before the body is read: a claim (``X-SB-*`` headers) must
    come with an API token. The refusal is audited only when the request has other valid
    credentials (a browser session); a request without valid credentials writes nothing."""
    header = request.headers.get
    if not signing.present(header) or isinstance(request.auth, Principal):
        return
    principal = request.user
    if isinstance(principal, Principal):
        _refused(principal, request, None, CLAIM_WITHOUT_CREDENTIAL)
    raise ClaimRefusedError(CLAIM_WITHOUT_CREDENTIAL)


def apply_claim(request: Request) -> None:
    """If the request carries a claim, verify it and let the token's principal act for the
    system actor; refuse the request (403, audited with the source IP) otherwise. A credential
    with ``SB_CLAIM_REFUSALS_PER_MINUTE`` refused claims in the current minute gets 429 without
    another verification or audit row. Call after ``refuse_claim_without_token`` and after the
    body was read within its limit."""
    header = request.headers.get
    principal = request.user
    if not signing.present(header) or not isinstance(principal, Principal):
        return
    _check_refusal_rate(principal)
    try:
        actor = claims.verify(header, _signed(request, request.body), workspace=principal.workspace,
                              via=principal.label)
    except claims.ClaimRefused as refusal:
        throttle.hit(_refusal_key(principal), REFUSAL_WINDOW)
        raise ClaimRefusedError(str(refusal)) from refusal
    if actor is not None:
        # DRF lets any object be the user; this API's users are Principals (see the classes above).
        request.user = principal.with_system_actor(actor)  # type: ignore[assignment]


def _refused(principal: Principal, request: Request, body: bytes | None, reason: str) -> None:
    _check_refusal_rate(principal)
    claims.record_refusal(request.headers.get, _signed(request, body), workspace=principal.workspace,
                          via=principal.label, reason=reason)
    throttle.hit(_refusal_key(principal), REFUSAL_WINDOW)


def _check_refusal_rate(principal: Principal) -> None:
    limit = int(settings.SB["CLAIM_REFUSALS_PER_MINUTE"])
    over = throttle.over(_refusal_key(principal), limit, REFUSAL_WINDOW)
    if over is not None:
        raise exceptions.Throttled(
            wait=over.seconds_left, detail=f"{over.hits} refused claims with this credential in the last minute "
                                           f"(at most {limit}, SB_CLAIM_REFUSALS_PER_MINUTE)")


def _refusal_key(principal: Principal) -> str:
    return f"claim-refused:{principal.credential}"


def _signed(request: Request, body: bytes | None) -> claims.HttpRequest:
    return claims.HttpRequest(request.method or "", request.get_full_path(), body,
                              request.META.get("REMOTE_ADDR", ""))
