"""The main job (``make run`` = ``manage.py sb_up``): gunicorn + WhiteNoise with DEBUG off, the
workers beside it and the demo, end to end; and ``sb_up --dev`` (``make dev``): runserver with
auto-reload and DEBUG on."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from django.db import connection, connections
from playwright.sync_api import expect, sync_playwright

from tests.support import ARTIFACTS, ROOT
from tests.support.cluster import ensure_tick_schedule

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PASSWORD = "local-test-password"
TOKEN = "metrics-token-for-the-main-job"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Job:
    """A running main job: its log, its process tree, and a clean stop (every process gone)."""

    def __init__(self, command: list[str], env: dict[str, str], port: int) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"sb_up-{port}.log"
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 150) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert self.proc.poll() is None, self.log()[-3000:]
            assert time.monotonic() < deadline, self.log()[-3000:]
            time.sleep(0.3)

    def sb_up(self) -> psutil.Process:
        """``make`` runs sb_up through a shell: the process of sb_up itself."""
        family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        return next(p for p in family if "sb_up" in p.cmdline() and "manage.py" in " ".join(p.cmdline()))

    def stop(self) -> None:
        """SIGTERM to sb_up, as Ctrl-C or an init system would; every process must end."""
        family = psutil.Process(self.proc.pid).children(recursive=True)
        self.sb_up().send_signal(signal.SIGTERM)
        self.proc.wait(timeout=40)
        _, alive = psutil.wait_procs(family, timeout=20)
        assert alive == [], f"left running: {alive}"


@pytest.fixture
def job_env(transactional_db: Any, tmp_path: Path) -> dict[str, str]:
    """The real settings (not the test settings) on the test database."""
    ensure_tick_schedule()
    env = {key: value for key, value in os.environ.items() if key not in ("SB_DEMO", "DEBUG")}
    env.update(DJANGO_SETTINGS_MODULE="schemabridge_site.settings", PYTHONUNBUFFERED="1",
               SB_DB_NAME=connection.settings_dict["NAME"], SB_ADMIN_PASSWORD=PASSWORD,
               SB_DRAIN_IDLE_SECONDS="1", PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"))
    return env


@pytest.fixture
def make_run(job_env: dict[str, str]) -> Iterator[Job]:
    port = free_port()
    job = Job(["make", "--no-print-directory", "run", f"ARGS=--port {port} --demo hello"],
              {**job_env, "SB_METRICS_TOKEN": TOKEN, "LOG_FORMAT": "json",
               "SB_ACCESS_LOG": str(ARTIFACTS / f"access-{port}.log")}, port)
    try:
        yield job
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)


@pytest.mark.browser
def test_make_run_serves_gunicorn_with_whitenoise_and_debug_off_and_runs_the_demo(make_run, monkeypatch):
    job = make_run
    job.wait_for_log("Demo hello: SUCCEEDED")
    # The second seed article's poller without the poll (issue 32): a WAIT for the rollout's event.
    job.wait_for_log("Demo deploy-service: SUCCEEDED")
    text = job.log()
    assert "user 'admin', password the SB_ADMIN_PASSWORD you set" in text
    assert PASSWORD not in text  # never printed (issue 15, finding 11)
    # LOG_FORMAT=json: gunicorn's own lines are JSON objects too (and so are Django's).
    [started] = [json.loads(line) for line in text.splitlines() if "Starting gunicorn" in line]
    assert started["logger"] == "gunicorn.error" and started["level"] == "INFO"
    # The access log goes to its file (SB_ACCESS_LOG), not under the banner (issue 33 §4).
    assert "GET /healthz" not in text
    assert f"Access log    in {ARTIFACTS / f'access-{job.port}.log'}" in text
    logged = (ARTIFACTS / f"access-{job.port}.log").read_text().splitlines()
    access = [json.loads(line) for line in logged if "GET /healthz" in line]
    assert access and all(entry["logger"] == "gunicorn.access" for entry in access)

    with httpx.Client(base_url=job.base, timeout=10) as http:
        assert http.get("/healthz").json() == {"ok": True}
        ready = _ready(http)
        assert ready.json()["workers"] >= 1 and ready.json()["migrations"] is True

        login = http.get("/accounts/login/")
        assert login.status_code == 200 and login.headers["server"] == "gunicorn"
        # DEBUG off: Django's technical 404 page never shows.
        missing = http.get("/no-such-page")
        assert missing.status_code == 404 and "URLconf" not in missing.text

        # Static files: collected, hashed and compressed, served by WhiteNoise from the app.
        stylesheet = re.search(r'href="(/static/ui/app\.[0-9a-f]{12}\.css)"', login.text)
        assert stylesheet, login.text
        css = http.get(stylesheet.group(1), headers={"Accept-Encoding": "gzip"})
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert css.headers["cache-control"] == "max-age=315360000, public, immutable"  # WhiteNoise's
        assert css.headers["content-encoding"] == "gzip"

        # A chunked body (no Content-Length) is refused, not read as an empty one (issue 28 §2).
        chunked = http.post("/api/v1/uploads", content=iter([b'{"a": 1}\n', b'{"a": 2}\n']),
                            headers={"Content-Type": "application/x-ndjson"})
        assert chunked.request.headers["transfer-encoding"] == "chunked"
        assert chunked.status_code == 411 and "Content-Length" in chunked.json()["detail"]

        # The metrics of every process: the qcluster worker ran the demo's steps.
        assert http.get("/metrics").status_code == 404
        metrics = http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert metrics.status_code == 200
        succeeded = re.search(r'^schemabridge_steps_succeeded_total\{kind="TASK"\} (\S+)$', metrics.text, re.M)
        assert succeeded and float(succeeded.group(1)) >= 1, metrics.text[:2000]

    _admin_logs_in_over_http(job.base, monkeypatch)
    job.stop()


def _ready(http: httpx.Client) -> httpx.Response:
    """/readyz once the qcluster has published its status (it does every few seconds)."""
    deadline = time.monotonic() + 30
    while (response := http.get("/readyz")).status_code != 200:
        assert response.status_code == 503 and time.monotonic() < deadline, response.text
        time.sleep(0.5)
    return response


def _admin_logs_in_over_http(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real browser logs in to the admin over plain http: the cookies are not https-only
    and nothing redirects to https."""
    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # after pytest loaded it as a plugin

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(base_url=base)
            page.set_default_timeout(15_000)
            page.goto("/admin/")
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", PASSWORD)
            page.click("input[type=submit], button[type=submit]")
            expect(page.locator("#site-name")).to_be_visible()
            expect(page.locator("body")).to_contain_text("Site administration")
            assert page.url.startswith("http://127.0.0.1")
            cookies = {cookie["name"]: cookie for cookie in page.context.cookies()}
            assert cookies["sessionid"]["secure"] is False and cookies["sessionid"]["httpOnly"] is True
        finally:
            browser.close()
    connections.close_all()


def test_sb_up_dev_serves_runserver_with_debug_and_without_the_demo(job_env):
    """``make dev``: runserver with its auto-reloader and DEBUG on; SB_DEMO unset here, so
    no demo is loaded. Stopping it leaves no server process behind (the reloader's child too)."""
    from workflows.models import WorkflowDefinition

    port = free_port()
    env = {**job_env, "DEBUG": "1", "SB_SSL_REDIRECT": "0", "SB_SECURE_COOKIES": "0", "SB_HSTS_SECONDS": "0"}
    job = Job([sys.executable, str(ROOT / "manage.py"), "sb_up", "--dev", "--port", str(port)], env, port)
    try:
        job.wait_for_log("SchemaBridge is running")
        assert "Demo          not loaded (SB_DEMO=1 loads it" in job.log()
        with httpx.Client(base_url=job.base, timeout=10) as http:
            assert http.get("/healthz").json() == {"ok": True}
            missing = http.get("/no-such-page")
            assert missing.status_code == 404 and "URLconf" in missing.text, "DEBUG on: the technical 404"
            assert "WSGIServer" in http.get("/accounts/login/").headers["server"]
            assert http.post("/demo/ledger/entries", json={"id": "e-1"}).status_code == 404
        assert not WorkflowDefinition.objects.filter(key__in=["hello", "migrate-entry", "ledger-migration"]).exists()
        reloader = [p for p in psutil.Process(job.proc.pid).children(recursive=True) if "runserver" in p.cmdline()]
        assert len(reloader) == 2, "the auto-reloader and its server process"
        job.stop()
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
