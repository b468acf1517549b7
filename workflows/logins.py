"""Throttled authentication: failed browser logins (the operator UI's and the admin's) and
failed API token authentications are counted in the database (``workflows.throttle``) per
source IP and, for logins, per username. After ``SB_AUTH_FAILURES_LIMIT`` failures in
``SB_AUTH_FAILURE_WINDOW_SECONDS`` a login form refuses with an error before checking the
password, and the API answers 429. A valid API token is never throttled.

A flood of failures adds one counter row per key and window, never a row per request.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm

from workflows import throttle


def _limit() -> int:
    return int(settings.SB["AUTH_FAILURES_LIMIT"])


def _window() -> int:
    return int(settings.SB["AUTH_FAILURE_WINDOW_SECONDS"])


def client_ip(request: Any) -> str:
    """The peer address. Behind a proxy this is the proxy's: SchemaBridge does not trust
    X-Forwarded-For (a client could set it); put the limit on the proxy, or run one per host."""
    return str(getattr(request, "META", {}).get("REMOTE_ADDR", "") or "-")


def _keys(request: Any, scope: str, username: str | None) -> list[str]:
    keys = [f"{scope}:ip:{client_ip(request)}"]
    if username:
        keys.append(f"{scope}:user:{username.strip().lower()[:150]}")
    return keys


def blocked(request: Any, scope: str, username: str | None = None) -> throttle.Tally | None:
    """The tally of the first key (IP, then username) that reached the limit, if any."""
    for key in _keys(request, scope, username):
        over = throttle.over(key, _limit(), _window())
        if over is not None:
            return over
    return None


def failed(request: Any, scope: str, username: str | None = None) -> None:
    """Count one failure against the IP (and the username)."""
    for key in _keys(request, scope, username):
        throttle.hit(key, _window())


def refusal(over: throttle.Tally) -> str:
    return (f"Too many failed attempts ({over.hits} in {_window()} s); try again in "
            f"{math.ceil(over.seconds_left)} s.")


class ThrottledLogin:
    """A login form mixin: refuse before checking the password once the IP or the username
    has too many recent failures; count each failure."""

    request: Any
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        over = blocked(self.request, "login", username)
        if over is not None:
            raise forms.ValidationError(refusal(over), code="throttled")
        try:
            return super().clean()  # type: ignore[misc]  # AuthenticationForm.clean, via the MRO
        except forms.ValidationError:
            failed(self.request, "login", username)
            raise


class LoginForm(ThrottledLogin, AuthenticationForm):
    """The operator UI's login form (``/accounts/login/``)."""


class AdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    """The Django admin's login form."""
