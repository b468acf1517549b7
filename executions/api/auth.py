"""Who is calling: ``Authorization: Token <secret>`` or the UI's own browser session, both
resolved to a workspace ``Principal`` that becomes ``request.user``.

Role checks are not here: each write checks its role inside its audit block, so refused
attempts are recorded with their reason.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions, permissions

from workflows.access import Principal, principal_for_token, principal_for_user


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
        principal = principal_for_user(result[0])
        if principal is None:
            raise exceptions.PermissionDenied("this account is not a member of any workspace")
        return (principal, None)


class HasPrincipal(permissions.BasePermission):
    """Any role may read; writes check their own role (see the module docstring)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal)
