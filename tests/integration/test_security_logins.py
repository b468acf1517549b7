"""Credentials (issue 15, finding 11): failed logins and failed token authentications are
throttled in the database, tokens can expire, and a token's last use is recorded at most
once a minute."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tests.support.clients import ok, problem
from workflows.access import create_token
from workflows.models import ApiToken, Membership, Role, ThrottleCounter

pytestmark = pytest.mark.django_db


def throttled(limit: int = 3) -> Any:
    # One long window, so the test does not straddle a window boundary.
    return override_settings(SB={**settings.SB, "AUTH_FAILURES_LIMIT": limit, "AUTH_FAILURE_WINDOW_SECONDS": 86400})


@pytest.fixture
def alice(workspace: Any) -> Any:
    user = get_user_model().objects.create_user("alice", password="correct horse", is_staff=True)
    Membership.objects.create(user=user, workspace=workspace, role=Role.ADMIN)
    return user


def login(client: Client, password: str, path: str = "/accounts/login/", ip: str = "198.51.100.1") -> Any:
    return client.post(path, {"username": "alice", "password": password}, REMOTE_ADDR=ip)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_failed_logins_are_throttled_per_ip_and_per_username(alice: Any, path: str) -> None:
    client = Client()
    with throttled():
        for _ in range(3):
            assert b"Too many failed attempts" not in login(client, "wrong", path).content
        refused = login(client, "correct horse", path)  # even the right password, from here
        assert refused.status_code == 200 and b"Too many failed attempts (3 in 86400 s)" in refused.content
        assert "_auth_user_id" not in client.session
        # Another address, same user: the username is throttled too.
        assert b"Too many failed attempts" in login(Client(), "correct horse", path, ip="198.51.100.2").content
        assert ThrottleCounter.objects.count() == 2  # one counter per key, not a row per attempt


def test_a_login_under_the_limit_succeeds(alice: Any) -> None:
    client = Client()
    with throttled():
        login(client, "wrong")
        assert login(client, "correct horse").status_code == 302


def test_failed_token_authentications_are_throttled_per_ip(workspace: Any) -> None:
    _, secret = create_token(workspace, name="good", role="viewer")
    client = APIClient(REMOTE_ADDR="198.51.100.9")
    with throttled(limit=2):
        for _ in range(2):
            client.credentials(HTTP_AUTHORIZATION="Token sbt_not-a-token")
            problem(client.get("/api/v1/workflows"), 401)
        body = problem(client.get("/api/v1/workflows"), 429)
        assert body["code"] == "throttled" and "too many failed token authentications" in body["detail"]
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        ok(client.get("/api/v1/workflows"))  # a valid token is never throttled
        assert ThrottleCounter.objects.count() == 1


def test_an_expired_token_is_refused(workspace: Any) -> None:
    out = io.StringIO()
    call_command("sb_token", "create", "--role", "viewer", "--name", "short", "--expires-in", "30m", stdout=out)
    secret = out.getvalue().strip().splitlines()[-1]
    assert "it expires 20" in out.getvalue()
    token = ApiToken.objects.get(name="short")
    assert timedelta(minutes=29) < token.expires_at - timezone.now() <= timedelta(minutes=30)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    ok(client.get("/api/v1/workflows"))
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert problem(client.get("/api/v1/workflows"), 401)["detail"] == "unknown, revoked or expired token"
    listing = io.StringIO()
    call_command("sb_token", "list", stdout=listing)
    assert "EXPIRES" in listing.getvalue()


@pytest.mark.parametrize("value", ["30", "0d", "1w", "d", "5 m"])
def test_sb_token_refuses_a_bad_duration(workspace: Any, value: str) -> None:
    with pytest.raises(CommandError, match="not a duration"):
        call_command("sb_token", "create", "--expires-in", value, stdout=io.StringIO())


def test_last_use_is_written_at_most_once_a_minute(workspace: Any) -> None:
    token, secret = create_token(workspace, name="ci", role="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    ok(client.get("/api/v1/workflows"))
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    ok(client.get("/api/v1/workflows"))
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    ok(client.get("/api/v1/workflows"))
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first - timedelta(minutes=1)


def test_throttle_counters_upsert_one_row_per_key_and_window_and_prune_old_ones(db: Any) -> None:
    from workflows import throttle

    assert [throttle.hit("k", 86400).hits for _ in range(3)] == [1, 2, 3]
    assert throttle.tally("k", 86400).hits == 3 and throttle.tally("other", 86400).hits == 0
    assert throttle.over("k", 3, 86400) is not None and throttle.over("k", 4, 86400) is None
    ThrottleCounter.objects.create(key="old", window_start=timezone.now() - timedelta(days=3), hits=9)
    throttle.hit("k", 86400)
    assert sorted(ThrottleCounter.objects.values_list("key", "hits")) == [("k", 4)]
