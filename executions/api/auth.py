"""Who is calling: ``Authorization: Token <secret>`` or the UI's own browser session, both
resolved to a workspace ``Principal`` that becomes ``request.user``.

Role checks are not here: each write checks its role inside its audit block, so refused
attempts are recorded with their reason.

A request may also carry a system actor's signed claim (``X-SB-*`` headers, S15). It must
come with a token; once verified (``workflows.claims``) the token's principal acts for the
actor, which is what reserved workflows need (``workflows.sudo``). A refused claim refuses
the whole request (403 ``claim-refused``), whatever it was for.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from workflows import claims, signing
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
            raise exceptions.AuthenticationFailed("unknown or revoked token")
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


class ClaimRefusedError(Forbidden):
    code = "claim-refused"


def apply_claim(request: Request) -> None:
    """If the request carries a claim (``X-SB-*`` headers), verify it and let the token's
    principal act for the system actor; refuse the request (403, audited) otherwise."""
    header = request.headers.get
    if not signing.present(header):
        return
    signed = _signed(request)
    principal = request.user
    if not isinstance(request.auth, Principal) or not isinstance(principal, Principal):
        workspace = principal.workspace if isinstance(principal, Principal) else None
        via = principal.label if isinstance(principal, Principal) else "no credentials"
        claims.record_refusal(header, signed, workspace=workspace, via=via, reason=CLAIM_WITHOUT_CREDENTIAL)
        raise ClaimRefusedError(CLAIM_WITHOUT_CREDENTIAL)
    try:
        actor = claims.verify(header, signed, workspace=principal.workspace, via=principal.label)
    except claims.ClaimRefused as refusal:
        raise ClaimRefusedError(str(refusal)) from refusal
    if actor is not None:
        # DRF lets any object be the user; this API's users are Principals (see the classes above).
        request.user = principal.with_system_actor(actor)  # type: ignore[assignment]


def record_refused_credentials(request: Request, error: exceptions.APIException) -> None:
    """A claim that came with refused credentials is refused too; record that attempt."""
    header = request.headers.get
    if signing.present(header):
        claims.record_refusal(header, _signed(request), workspace=None, via="refused credentials",
                              reason=f"the credentials it came with were refused: {error.detail}")


def _signed(request: Request) -> claims.HttpRequest:
    return claims.HttpRequest(request.method or "", request.get_full_path(), request.body)
