"""The main job (``make run``): migrate, create a local admin login, load the demo (when the
demo app is installed: ``SB_DEMO=1``, which ``make run`` sets), then run the web app and a
qcluster side by side until Ctrl-C."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from executions import extensions
from executions.models import Execution
from workflows.models import Membership, Role, Workspace
from workflows.services import ensure_default_workspace

LOCAL_DIR = Path(settings.BASE_DIR) / ".local"


class Command(BaseCommand):
    help = "Run SchemaBridge locally: web UI + workers on the embedded database (+ the demo with SB_DEMO=1)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("SB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("SB_PORT", "8000")))
        parser.add_argument("--demo", choices=["all", "hello", "none"], default="all",
                            help="demo executions to start (with SB_DEMO=1): all (default), only the small hello "
                                 "one, or none")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        workspace = ensure_default_workspace()
        self._admin_password(workspace)
        base_url = f"http://{options['host']}:{options['port']}"
        demo = extensions.local_demo()
        if demo is not None:
            demo.load_demo(workspace, base_url=base_url)
        procs = self._start(options["host"], options["port"])
        try:
            self._wait_until_serving(base_url, procs)
            started = demo.start_demo(workspace, options["demo"]) if demo is not None else []
            self._banner(base_url, started, demo_loaded=demo is not None)
            self._supervise(procs, watching=started)
        finally:
            self._stop(procs)

    def _admin_password(self, workspace: Workspace) -> str:
        """SB_ADMIN_PASSWORD if given; otherwise a generated password kept in
        .local/admin-password (created once, owner-only) so it stays the same across runs."""
        password = os.environ.get("SB_ADMIN_PASSWORD")
        if not password:
            secret_file = LOCAL_DIR / "admin-password"
            if not secret_file.exists():
                LOCAL_DIR.mkdir(exist_ok=True)
                secret_file.write_text(secrets.token_urlsafe(12) + "\n")
                secret_file.chmod(0o600)
            password = secret_file.read_text().strip()
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        Membership.objects.update_or_create(user=user, workspace=workspace, defaults={"role": Role.ADMIN})
        return password

    def _start(self, host: str, port: int) -> list[subprocess.Popen[bytes]]:
        manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
        env = {**os.environ, "DEBUG": os.environ.get("DEBUG", "1")}
        web = subprocess.Popen([*manage, "runserver", f"{host}:{port}", "--noreload"], env=env)  # noqa: S603
        workers = subprocess.Popen([*manage, "qcluster"], env=env)  # noqa: S603
        return [web, workers]

    def _wait_until_serving(self, base_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a process exited during start-up; see the output above")
            try:
                httpx.get(f"{base_url}/healthz", timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise SystemExit(f"the web server did not answer on {base_url} within 60 s")

    def _banner(self, base_url: str, started: list[Execution], *, demo_loaded: bool) -> None:
        # Never the password itself: terminal scroll-back and CI logs outlive the run.
        where = ("the SB_ADMIN_PASSWORD you set" if os.environ.get("SB_ADMIN_PASSWORD")
                 else f"in {LOCAL_DIR / 'admin-password'} (owner-only)")
        lines = [
            "",
            "SchemaBridge is running (Ctrl-C stops it).",
            f"  Operator UI   {base_url}/",
            f"  Admin         {base_url}/admin/",
            f"  REST API      {base_url}/api/v1/   (docs: {base_url}/api/docs/)",
            f"  Login         user 'admin', password {where}",
        ]
        for execution in started:
            lines.append(f"  Demo          {execution.workflow.key}: {base_url}/executions/{execution.pk}/")
        if not demo_loaded:
            lines.append("  Demo          not loaded (SB_DEMO=1 loads it, as `make run` does)")
        lines.append("")
        self.stdout.write("\n".join(lines))

    def _supervise(self, procs: list[subprocess.Popen[bytes]], watching: list[Execution]) -> None:
        """Keep both processes up (one dying stops everything) and report each demo
        execution when it finishes."""
        stop = {"now": False}

        def request_stop(signum: int, frame: Any) -> None:
            stop["now"] = True

        signal.signal(signal.SIGTERM, request_stop)
        pending = {execution.pk: execution.workflow.key for execution in watching}
        try:
            while not stop["now"]:
                for proc in procs:
                    if proc.poll() is not None:
                        raise SystemExit(f"process {proc.args!r} exited with {proc.returncode}")
                for execution in Execution.objects.filter(pk__in=list(pending)).exclude(
                        status__in=["PENDING", "RUNNING"]):
                    took = f" in {execution.duration:.1f}s" if execution.duration is not None else ""
                    self.stdout.write(f"Demo {pending.pop(execution.pk)}: {execution.status}{took} "
                                      f"(execution {execution.pk})")
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass

    def _stop(self, procs: list[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
