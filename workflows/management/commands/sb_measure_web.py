"""``manage.py sb_measure_web oversized-body``: the web process's peak memory while it
refuses oversized or unauthorised request bodies (issue 15, finding 5; docs/security.md).

It serves the application (production settings, plain http on 127.0.0.1) from a web
process — ``--server wsgi``: the WSGI application in the standard library's server, which
leaves an unread body unread like production servers do; ``--server runserver``: Django's
development server (``make run``), which itself reads any unread body into memory after
the response — warms it up, then for each case resets the process's peak RSS
(``/proc/PID/clear_refs``), sends one request and reads the new peak (``VmHWM``):

- ``viewer-8mb``: a viewer's 8 MiB start (within SB_MAX_START_BYTES): refused for its
  role (403) before the body is read;
- ``viewer-64mb``: a viewer's 64 MiB start: the same 403;
- ``operator-64mb``: an operator's 64 MiB start: refused from its Content-Length (413);
- ``operator-9mb``: an operator's 9 MiB start: 413 as well;
- ``operator-8mb``: an operator's 8 MiB start, within every limit: read, parsed and
  validated (404: its workflow does not exist) — what an allowed body costs.

The bodies are JSON arrays of small elements, the shape that cost ~130x its size to parse.
The tokens are created for the run and revoked at its end. Linux only.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.access import create_token, revoke_token
from workflows.services import ensure_default_workspace

MIB = 1024 * 1024


class Command(BaseCommand):
    help = "Measure the web process's peak memory for oversized request bodies (Linux)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["oversized-body"])
        parser.add_argument("--port", type=int, default=0, help="port for the web server (default: a free one)")
        parser.add_argument("--server", choices=["wsgi", "runserver"], default="wsgi",
                            help="wsgi: the application in wsgiref (default); runserver: Django's dev server")

    def handle(self, *args: Any, **options: Any) -> None:
        if not Path("/proc/self/status").exists():
            raise CommandError("this measurement reads /proc: Linux only")
        workspace = ensure_default_workspace()
        tokens = {role: create_token(workspace, name=f"sb-measure-{role}-{os.getpid()}", role=role,
                                     created_by="cli:sb_measure_web") for role in ("viewer", "operator")}
        secrets = {role: secret for role, (_, secret) in tokens.items()}
        port = options["port"] or _free_port()
        server = _start(port, options["server"])
        try:
            base = f"http://127.0.0.1:{port}"
            _wait(base, server)
            _send(base, secrets["viewer"], "GET", "/api/v1/workflows", b"")  # warm up: imports, connections
            self.stdout.write(f"{options['server']} web process {server.pid}: "
                              f"{_kib(server.pid, 'VmRSS') / 1024:.0f} MiB resident after warm-up")
            self.stdout.write(f"{'CASE':<16} {'STATUS':<7} {'SENT':>9} {'PEAK RSS':>9} {'GROWTH':>9}")
            for case, status, sent, peak, growth in _cases(base, secrets, server.pid):
                self.stdout.write(f"{case:<16} {status:<7} {sent / MIB:>6.0f} MiB {peak / 1024:>5.0f} MiB "
                                  f"{growth / 1024:>+5.1f} MiB")
        finally:
            server.terminate()
            server.wait(timeout=20)
            for token, _ in tokens.values():
                revoke_token(token)


def _cases(base: str, secrets: dict[str, str], pid: int) -> Iterator[tuple[str, int, int, int, int]]:
    for case, role, size in [("viewer-8mb", "viewer", 8 * MIB - 64), ("viewer-64mb", "viewer", 64 * MIB),
                             ("operator-64mb", "operator", 64 * MIB), ("operator-9mb", "operator", 9 * MIB),
                             ("operator-8mb", "operator", 8 * MIB - 64)]:
        body = _array_body(size)
        _reset_peak(pid)
        before = _kib(pid, "VmRSS")
        status = _send(base, secrets[role], "POST", "/api/v1/executions", body)
        time.sleep(0.3)  # let the server finish with the connection
        peak = _kib(pid, "VmHWM")
        yield case, status, len(body), peak, peak - before


def _array_body(size: int) -> bytes:
    head, tail = b'{"workflow": "any", "input": [', b"0]}"
    return head + b"0," * ((size - len(head) - len(tail)) // 2) + tail


def _send(base: str, secret: str, method: str, path: str, body: bytes) -> int:
    import httpx

    headers = {"Authorization": f"Token {secret}", "Content-Type": "application/json"}
    try:
        return httpx.request(method, base + path, content=body, headers=headers, timeout=120).status_code
    except httpx.HTTPError:
        return 0  # the server answered and closed before taking the whole body (read the peak anyway)


SERVE_WSGI = """
from wsgiref.simple_server import WSGIRequestHandler, make_server
from django.core.wsgi import get_wsgi_application

class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass

make_server("127.0.0.1", {port}, get_wsgi_application(), handler_class=Quiet).serve_forever()
"""


def _start(port: int, server: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DEBUG": "0", "SB_SSL_REDIRECT": "0", "ALLOWED_HOSTS": "127.0.0.1",
           "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "schemabridge_site.settings")}
    base = Path(settings.BASE_DIR)
    if server == "runserver":
        command = [sys.executable, str(base / "manage.py"), "runserver", f"127.0.0.1:{port}", "--noreload"]
    else:
        command = [sys.executable, "-c", SERVE_WSGI.format(port=port)]
    return subprocess.Popen(command, cwd=base, env=env, stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=subprocess.DEVNULL)


def _wait(base: str, server: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise CommandError("the web server exited during start-up")
        try:
            httpx.get(base + "/healthz", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise CommandError(f"the web server did not answer on {base} within 60 s")


def _reset_peak(pid: int) -> None:
    """Start a new peak: writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError as error:
        raise CommandError(f"cannot reset the peak RSS of process {pid}: {error}") from error


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise CommandError(f"no {field} in /proc/{pid}/status")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
