"""Issue 33 §4, ``make run`` (``manage.py sb_up``) on the embedded PostgreSQL, in a temporary
data folder: its banner stays readable (the access log goes to a file), Ctrl-C stops the
embedded server the run started — or, if it was running before, leaves it running and says
how to stop it — and ``sb_db status`` reports a stopped server without starting it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp_path: Path) -> dict[str, str]:
    gone = ("DATABASE_URL", "SB_DB_NAME", "SB_TEST_DB_NAME", "SB_DEMO", "DEBUG", "SB_ACCESS_LOG",
            "DJANGO_SETTINGS_MODULE")
    env = {key: value for key, value in os.environ.items() if key not in gone}
    env.update(PYTHONUNBUFFERED="1", SB_PGDATA=str(tmp_path / "pgdata"), SB_ADMIN_PASSWORD="a-local-password",
               SB_SSL_REDIRECT="0", SB_SECURE_COOKIES="0", SB_HSTS_SECONDS="0", SB_DRAIN_IDLE_SECONDS="1",
               PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"), SB_WEB_WORKERS="1")
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180, check=True)
    return done.stdout


def _postgres_running(data: Path) -> bool:
    pid_file = data / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().split()[0]), 0)
    except ProcessLookupError:
        return False
    return True


class Run:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = _free_port()
        self.log_path = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "sb_up", "--port",
                                          str(self.port), "--demo", "none"], cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert self.proc.poll() is None, self.log()[-3000:]
            assert time.monotonic() < deadline, self.log()[-3000:]
            time.sleep(0.3)

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # what the terminal sends on Ctrl-C (the group gets it too)
        self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def env(tmp_path: Path):
    env = _env(tmp_path)
    yield env
    if _postgres_running(tmp_path / "pgdata"):  # a failed test leaves no server behind
        _manage(env, "sb_db", "stop")


def test_ctrl_c_stops_the_embedded_postgresql_it_started_and_says_when_it_keeps_one_running(tmp_path, env):
    data = tmp_path / "pgdata"
    run = Run(env, tmp_path / "first.log")
    try:
        run.wait_for("SchemaBridge is running")
        assert _postgres_running(data)
        with httpx.Client(base_url=f"http://127.0.0.1:{run.port}", timeout=10) as http:
            for _ in range(3):
                assert http.get("/healthz").status_code == 200
        text = run.log()
        assert f"stops the web app, the workers and the embedded PostgreSQL this run started ({data})" in text
        access_log = ROOT / ".local" / "logs" / "access.log"
        assert f"Access log    in {access_log}" in text
        assert "GET /healthz" not in text  # the banner is not buried under access lines
        assert "GET /healthz" in access_log.read_text()
        run.ctrl_c()
    finally:
        run.kill()
    assert "the embedded PostgreSQL this run started" in run.log().splitlines()[-1]
    assert not _postgres_running(data)

    # `sb_db status` on the stopped server reports it, and leaves it stopped.
    assert _manage(env, "sb_db", "status").startswith(f"not running: data {data}")
    assert not _postgres_running(data)

    # A server that was running before the run keeps running after Ctrl-C, and the run says so.
    assert _manage(env, "sb_db", "start").startswith(f"running: data {data}")
    run = Run(env, tmp_path / "second.log")
    try:
        run.wait_for("SchemaBridge is running")
        assert "keeps running (it was running before this run): `python manage.py sb_db stop` stops it" in run.log()
        run.ctrl_c()
    finally:
        run.kill()
    last = run.log().splitlines()[-1]
    assert last == f"Stopped; the embedded PostgreSQL ({data}) keeps running. `python manage.py sb_db stop` stops it."
    assert _postgres_running(data)
    assert _manage(env, "sb_db", "status").startswith(f"running: data {data}")
    assert _manage(env, "sb_db", "stop").strip() == "stopped"
    assert not _postgres_running(data)
