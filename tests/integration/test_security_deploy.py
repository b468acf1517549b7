"""Deployment hygiene (issue 15, finding 11): production settings pass ``check --deploy``
with no warning, ``make run``'s DEBUG mode still serves plain http, and the test client's
``testserver`` host is accepted by the test settings only."""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HTTPS_VARIABLES = ("DEBUG", "SB_SSL_REDIRECT", "SB_SECURE_COOKIES", "SB_HSTS_SECONDS", "SB_HSTS_INCLUDE_SUBDOMAINS",
                   "SB_HSTS_PRELOAD", "SB_PROXY_SSL_HEADER", "ALLOWED_HOSTS")
SHOW = ("from django.conf import settings as s; import json; print(json.dumps([s.SECURE_SSL_REDIRECT, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, getattr(s, 'SECURE_PROXY_SSL_HEADER', "
        "None), 'testserver' in s.ALLOWED_HOSTS]))")


def production_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in HTTPS_VARIABLES}
    return {**env, "DJANGO_SETTINGS_MODULE": "schemabridge_site.settings", "SECRET_KEY": secrets.token_urlsafe(50),
            **extra}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def settings_in(env: dict[str, str]) -> list[object]:
    result = run(["manage.py", "shell", "-c", SHOW], env)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


def test_production_settings_pass_check_deploy_without_a_warning() -> None:
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_production_defaults_are_secure_and_debug_serves_plain_http() -> None:
    assert settings_in(production_env()) == [True, True, True, 31_536_000, None, False]
    assert settings_in(production_env(DEBUG="1")) == [False, False, False, 0, None, False]
    behind_proxy = settings_in(production_env(SB_PROXY_SSL_HEADER="X-Forwarded-Proto", SB_HSTS_SECONDS="60"))
    assert behind_proxy[3:5] == [60, ["HTTP_X_FORWARDED_PROTO", "https"]]


def test_only_the_test_settings_accept_testserver() -> None:
    assert settings_in({**production_env(), "DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings"})[-1] is True


def test_sb_up_says_where_the_admin_password_is_without_printing_it(monkeypatch: Any) -> None:
    from executions.management.commands import sb_up

    monkeypatch.delenv("SB_ADMIN_PASSWORD", raising=False)
    out = io.StringIO()
    sb_up.Command(stdout=out)._banner("http://127.0.0.1:8000", [], demo_loaded=True, access_log="off", dev=False,
                                      keep_db=True)
    password_file = ROOT / ".local" / "admin-password"
    assert f"user 'admin', password in {password_file} (owner-only)" in out.getvalue()
    if password_file.exists():
        assert password_file.read_text().strip() not in out.getvalue()
