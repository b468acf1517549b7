"""The main job (``make run`` = ``manage.py sb_up``): web app + workers + demo, end to end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from django.db import connection

from tests.support import ARTIFACTS, ROOT
from tests.support.cluster import ensure_tick_schedule

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_sb_up_serves_the_app_runs_a_demo_to_completion_and_stops_cleanly(transactional_db):
    ensure_tick_schedule()
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings", "DEBUG": "1",
           "SB_DB_NAME": connection.settings_dict["NAME"], "SB_ADMIN_PASSWORD": "local-test-password",
           "PYTHONUNBUFFERED": "1", "SB_DRAIN_IDLE_SECONDS": "1"}
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"sb_up-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "sb_up", "--port", str(port),
                                 "--demo", "hello"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "Demo hello: SUCCEEDED" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)
        text = log_path.read_text()
        assert "user 'admin', password the SB_ADMIN_PASSWORD you set" in text
        assert "local-test-password" not in text  # never printed (issue 15, finding 11)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json() == {"ok": True}
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    _, alive = psutil.wait_procs(children, timeout=20)
    assert alive == [], f"left running: {alive}"


def test_sb_up_without_sb_demo_serves_the_app_without_the_demo(transactional_db):
    """Production settings, SB_DEMO unset: the app and workers run, no demo is loaded."""
    from workflows.models import WorkflowDefinition

    ensure_tick_schedule()
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "SB_DEMO"}
    env.update(DJANGO_SETTINGS_MODULE="schemabridge_site.settings", DEBUG="1", PYTHONUNBUFFERED="1",
               SB_DB_NAME=connection.settings_dict["NAME"], SB_ADMIN_PASSWORD="local-test-password")
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"sb_up-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "sb_up", "--port", str(port)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "SchemaBridge is running" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)
        assert "Demo          not loaded (SB_DEMO=1 loads it" in log_path.read_text()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json() == {"ok": True}
        assert httpx.post(f"http://127.0.0.1:{port}/demo/ledger/entries", json={"id": "e-1"}, timeout=5).status_code \
            == 404
        assert not WorkflowDefinition.objects.filter(key__in=["hello", "migrate-entry", "ledger-migration"]).exists()
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2, "the web server and the qcluster"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    _, alive = psutil.wait_procs(children, timeout=20)
    assert alive == [], f"left running: {alive}"
