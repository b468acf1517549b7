"""The main job (``make run``): migrate, create a local admin login, load the demo (when the
demo app is installed: ``SB_DEMO=1``, which ``make run`` sets), then run the web app and a
qcluster side by side until Ctrl-C.

The web app is served by gunicorn (schemabridge_site/gunicorn_conf.py) with static files
collected for WhiteNoise, DEBUG as the environment says (off unless set); ``--dev`` (``make
dev``) serves it with Django's runserver instead, auto-reloading, DEBUG on. Either way every
process writes its metrics to PROMETHEUS_MULTIPROC_DIR (default ``.local/metrics``, emptied at
start), so /metrics adds up the web and worker processes (docs/operations.md).

So the banner stays readable, gunicorn's access log goes to ``.local/logs/access.log``
(SB_ACCESS_LOG overrides: ``-`` prints it here, ``off`` drops it). On Ctrl-C (or SIGTERM) the
embedded PostgreSQL (no DATABASE_URL) is stopped too if this run started it; one that was
running before keeps running, and the last line says so and how to stop it."""

from __future__ import annotations

import contextlib
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
from executions.management import embedded
from executions.models import Execution
from workflows.models import Membership, Role, Workspace
from workflows.services import ensure_default_workspace

LOCAL_DIR = Path(settings.BASE_DIR) / ".local"


class Command(BaseCommand):
    help = "Run SchemaBridge locally: web UI + workers on the embedded database (+ the demo with SB_DEMO=1)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("SB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("SB_PORT", "8000")))
        parser.add_argument("--dev", action="store_true",
                            help="development: Django's runserver with auto-reload and DEBUG on, instead of gunicorn")
        parser.add_argument("--demo", choices=["all", "hello", "none"], default="all",
                            help="demo executions to start (with SB_DEMO=1): all (default), only the small hello "
                                 "one, or none")
        parser.add_argument("--keep-db", action="store_true",
                            help="leave the embedded PostgreSQL running on Ctrl-C even if this run started it")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._run(options)
        except KeyboardInterrupt:
            pass  # Ctrl-C before the supervisor took over: the processes are stopped (below)
        finally:
            self.stdout.write(embedded.after_run(keep=options["keep_db"]))

    def _run(self, options: dict[str, Any]) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        if not options["dev"]:
            call_command("collectstatic", interactive=False, verbosity=0)
        self._metrics_dir()
        access_log = self._access_log()
        workspace = ensure_default_workspace()
        self._admin_password(workspace)
        base_url = f"http://{options['host']}:{options['port']}"
        demo = extensions.local_demo()
        if demo is not None:
            demo.load_demo(workspace, base_url=base_url)
        procs = self._start(options["host"], options["port"], dev=options["dev"])
        try:
            self._wait_until_serving(base_url, procs)
            started = demo.start_demo(workspace, options["demo"]) if demo is not None else []
            self._banner(base_url, started, demo_loaded=demo is not None, access_log=access_log,
                         dev=options["dev"], keep_db=options["keep_db"])
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

    @staticmethod
    def _metrics_dir() -> None:
        """Every process of this run counts into one fresh directory (prometheus-client's
        multiprocess mode wants it emptied between runs). Set before any child starts."""
        directory = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip() or LOCAL_DIR / "metrics")
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)

    @staticmethod
    def _access_log() -> str:
        """Where gunicorn's access log goes: SB_ACCESS_LOG if set, else a file (set before the
        web server starts: gunicorn_conf.py reads it)."""
        chosen = os.environ.get("SB_ACCESS_LOG", "").strip()
        if not chosen:
            (LOCAL_DIR / "logs").mkdir(parents=True, exist_ok=True)
            chosen = os.environ["SB_ACCESS_LOG"] = str(LOCAL_DIR / "logs" / "access.log")
        return chosen

    def _start(self, host: str, port: int, *, dev: bool) -> list[subprocess.Popen[bytes]]:
        manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
        if dev:
            env = {**os.environ, "DEBUG": "1"}
            # Its own session: the auto-reloader runs the server in a child process, and the
            # whole group must stop with us (see _stop).
            web = subprocess.Popen([*manage, "runserver", f"{host}:{port}"], env=env,  # noqa: S603
                                   start_new_session=True)
        else:
            env = dict(os.environ)
            web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:schemabridge_site.gunicorn_conf",  # noqa: S603
                                    "--bind", f"{host}:{port}"], env=env, cwd=settings.BASE_DIR)
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

    def _banner(self, base_url: str, started: list[Execution], *, demo_loaded: bool, access_log: str, dev: bool,
                keep_db: bool) -> None:
        # Never the password itself: terminal scroll-back and CI logs outlive the run.
        where = ("the SB_ADMIN_PASSWORD you set" if os.environ.get("SB_ADMIN_PASSWORD")
                 else f"in {LOCAL_DIR / 'admin-password'} (owner-only)")
        logs = {"-": "printed here", "off": "off"}.get(access_log, f"in {access_log}")
        lines = [
            "",
            "SchemaBridge is running.",
            f"  Operator UI   {base_url}/",
            f"  Admin         {base_url}/admin/",
            f"  REST API      {base_url}/api/v1/   (docs: {base_url}/api/docs/)",
            f"  Login         user 'admin', password {where}",
        ]
        for execution in started:
            lines.append(f"  Demo          {execution.workflow.key}: {base_url}/executions/{execution.pk}/")
        if not demo_loaded:
            lines.append("  Demo          not loaded (SB_DEMO=1 loads it, as `make run` does)")
        if not dev:
            lines.append(f"  Access log    {logs} (SB_ACCESS_LOG: a file, - for here, or off)")
        lines.append(f"  Ctrl-C        {embedded.on_stop(keep=keep_db)}")
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
        """SIGTERM each child (the dev server's whole process group), then wait; SIGKILL what
        is still there after 15 s."""
        groups = {proc.pid for proc in procs if _leads_group(proc)}
        for proc in procs:
            _signal(proc, signal.SIGTERM, group=proc.pid in groups)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL, group=proc.pid in groups)
                proc.wait(timeout=5)
        for pgid in groups:  # the auto-reloader's server child, if it outlived its parent
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def _leads_group(proc: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False


def _signal(proc: subprocess.Popen[bytes], signum: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(proc.pid, signum)
        elif proc.poll() is None:
            proc.send_signal(signum)
