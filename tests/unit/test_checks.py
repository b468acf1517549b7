"""The system checks that refuse an unsafe configuration at ``manage.py check``."""

from __future__ import annotations

from types import SimpleNamespace

from django.test import override_settings

from workflows import checks


def test_a_non_postgresql_database_is_refused(monkeypatch):
    monkeypatch.setattr(checks, "connections", {"default": SimpleNamespace(vendor="sqlite")})
    [error] = checks.database_is_postgresql(None)
    assert error.id == "schemabridge.E001" and "PostgreSQL only" in error.msg
    monkeypatch.setattr(checks, "connections", {"default": SimpleNamespace(vendor="postgresql")})
    assert checks.database_is_postgresql(None) == []


def test_time_zone_support_is_required():
    with override_settings(USE_TZ=False):
        [error] = checks.time_zone_support(None)
    assert error.id == "schemabridge.E002"
    assert checks.time_zone_support(None) == []


def test_django_q_retry_must_exceed_its_timeout(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 600}
    [error] = checks.q_retry_exceeds_timeout(None)
    assert error.id == "schemabridge.E003" and "must be greater than" in error.msg
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 660}
    assert checks.q_retry_exceeds_timeout(None) == []


def test_database_url_selects_that_server_instead_of_the_embedded_one(monkeypatch):
    from schemabridge_site import embedded_db
    from schemabridge_site import settings as project_settings

    def refuse_embedded(*args, **kwargs):
        raise AssertionError("the embedded server must not start when DATABASE_URL is set")

    monkeypatch.setattr(embedded_db, "ensure_running", refuse_embedded)
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:secret@db.internal:6543/prod")
    monkeypatch.setenv("SB_DB_NAME", "")
    config = project_settings._database()
    assert (config["ENGINE"], config["HOST"], config["PORT"], config["NAME"], config["USER"]) == (
        "django.db.backends.postgresql", "db.internal", 6543, "prod", "app")
    assert config["CONN_HEALTH_CHECKS"] is True and config["OPTIONS"]["connect_timeout"] == 10


def test_a_local_env_file_fills_in_only_what_the_environment_lacks(tmp_path, monkeypatch):
    from schemabridge_site.settings import load_dotenv

    env_file = tmp_path / ".env"
    env_file.write_text("# comment\nSB_TEST_FROM_FILE=file\nSB_TEST_BOTH=file\n\nnot a setting\n")
    monkeypatch.delenv("SB_TEST_FROM_FILE", raising=False)
    monkeypatch.setenv("SB_TEST_BOTH", "environment")
    load_dotenv(env_file)
    import os

    assert os.environ["SB_TEST_FROM_FILE"] == "file"
    assert os.environ["SB_TEST_BOTH"] == "environment"
    monkeypatch.delenv("SB_TEST_FROM_FILE")
