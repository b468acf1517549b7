"""API authentication: ``Authorization: Token <secret>`` resolves to a workspace Principal."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from workflows.access import principal_for_token


class TokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <secret>'")
        principal = principal_for_token(header[1])
        if principal is None:
            raise exceptions.AuthenticationFailed("unknown or revoked token")
        return (principal, principal)

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
