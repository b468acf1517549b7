"""/healthz, /readyz and /metrics (issue 17): probes for load balancers and a Prometheus
endpoint that only a holder of SB_METRICS_TOKEN can read."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "metrics-token-for-tests"


@pytest.fixture
def metrics_token(settings: Any) -> str:
    settings.SB = {**settings.SB, "METRICS_TOKEN": TOKEN}
    return TOKEN


def scrape(client: Client, token: str = TOKEN) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


def test_healthz_answers_without_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"ok": True}


def test_readyz_is_503_without_a_live_worker(db, client):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"ok": False, "database": True, "migrations": True, "workers": 0}


def test_readyz_is_503_when_the_database_is_unreachable(db, client, monkeypatch):
    from django.db import OperationalError
    from django.db.backends.utils import CursorWrapper

    def down(self: Any, sql: str, params: Any = None) -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(CursorWrapper, "execute", down)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"ok": False, "database": False, "migrations": False, "workers": 0}


def test_probes_are_not_redirected_to_https(client):
    """Probes reach the process over plain http even when every other path is https-only."""
    with override_settings(SECURE_SSL_REDIRECT=True):
        assert client.get("/healthz").status_code == 200
        assert client.get("/accounts/login/").status_code == 301


def test_metrics_do_not_exist_without_a_token_setting(db, client, settings):
    settings.SB = {**settings.SB, "METRICS_TOKEN": ""}
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.parametrize("header", [
    None, "", f"Token {TOKEN}", f"Basic {TOKEN}", "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
    "Bearer é-not-ascii",
])
def test_metrics_refuse_a_missing_or_wrong_token(db, client, metrics_token, header):
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    assert client.get("/metrics", **extra).status_code == 404


def test_metrics_with_the_right_token_are_prometheus_text(db, client, metrics_token):
    samples = scrape(client)
    names = {name for name, _ in samples}
    assert names and all(name.startswith("schemabridge_") for name in names), sorted(names)
    for gauge in ("schemabridge_steps_ready", "schemabridge_timers_due", "schemabridge_steps_running",
                  "schemabridge_payload_bytes", "schemabridge_payload_capacity_bytes", "schemabridge_workers_alive"):
        assert (gauge, ()) in samples, gauge
    assert samples[("schemabridge_workers_alive", ())] == 0
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"bearer {TOKEN}")
    assert response.status_code == 200, "the scheme is case-insensitive (RFC 9110)"

