"""Measure what an attack on the outbound edge costs a worker:
``manage.py sb_measure oversized-response [--bytes N] [--cap N]``.

A loopback server (a child process started for this command only) sends ``--bytes`` bytes without a
Content-Length, so the cap, not the header, has to stop the read. The HTTP vertex's ``run``
calls it for a scratch destination with ``max_response_bytes = --cap``, inside a transaction
that is rolled back (nothing is kept). A thread samples this process's resident memory every
2 ms; the JSON printed says how much it grew at peak (docs/security.md records the figure).
"""

from __future__ import annotations

import contextlib
import gc
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from executions.core.runs import StepRun
from executions.destinations import outbound
from executions.engine.vertices import http
from executions.handlers import NonRetryable
from executions.models import Destination
from workflows.dsl import ast
from workflows.services import ensure_default_workspace

MB = 1024 * 1024


class _Rollback(Exception):
    pass


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


class _PeakSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = _rss_bytes()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.002):
            self.peak = max(self.peak, _rss_bytes())


# The server runs in its own process, so that only the worker side is measured here.
_FLOOD = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

size = int(sys.argv[1])

class Flood(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()  # no Content-Length: the body ends when the connection closes
        block = b"x" * (1 << 20)
        try:
            for start in range(0, size, len(block)):
                self.wfile.write(block[:min(len(block), size - start)])
        except OSError:
            pass  # the client hung up at its cap

server = HTTPServer(("127.0.0.1", 0), Flood)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextlib.contextmanager
def _flood_server(size: int) -> Iterator[str]:
    """The base URL of a loopback server (a child process) that floods every GET."""
    # S603: the command line is this module's own script and an integer.
    child = subprocess.Popen([sys.executable, "-c", _FLOOD, str(size)],  # noqa: S603
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline()) if child.stdout else 0
        yield f"http://127.0.0.1:{port}"
    finally:
        child.terminate()
        child.communicate(timeout=10)  # also closes its stdout pipe


class Command(BaseCommand):
    help = "Measure worker memory growth while an HTTP vertex fetches an oversized response."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scenario", choices=["oversized-response"])
        parser.add_argument("--bytes", type=int, default=300 * 1000 * 1000, help="Bytes the server sends.")
        parser.add_argument("--cap", type=int, default=outbound.DEFAULT_MAX_BYTES,
                            help="The destination's max_response_bytes.")

    def handle(self, *args: Any, **options: Any) -> None:
        # Only this command's own server is opened, whatever SB_OUTBOUND_ALLOW says.
        saved = settings.SB
        settings.SB = {**saved, "OUTBOUND_ALLOW": "127.0.0.1/32"}
        try:
            with _flood_server(options["bytes"]) as base_url:
                result = self._measure(base_url, options["bytes"], options["cap"])
        finally:
            settings.SB = saved
        self.stdout.write(json.dumps(result, indent=2))

    def _measure(self, base_url: str, size: int, cap: int) -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        try:
            with transaction.atomic():
                destination = Destination.objects.create(
                    workspace=ensure_default_workspace(), name="sb-measure-scratch", base_url=base_url,
                    timeout_seconds=120, max_response_bytes=cap)
                step = SimpleNamespace(
                    vertex=ast.Http(id="fetch", destination=destination.name, method="GET", path="/flood",
                                    timeout_seconds=120.0),
                    destination={"id": destination.pk, "name": destination.name, "base_url": base_url,
                                 "timeout_seconds": 120.0, "max_response_bytes": cap},
                    context={"input": None, "steps": {}}, idempotency_key="sb-measure", step_id=0,
                    execution=SimpleNamespace(workspace_id=destination.workspace_id), extra={})
                # One small call first: the client, its TLS context and its connection pool are
                # made once per worker thread, not per response.
                with contextlib.suppress(outbound.ResponseTooLarge):
                    outbound.fetch("GET", f"{base_url}/warm-up", timeout=10, max_bytes=1)
                gc.collect()
                before = _rss_bytes()
                sampler = _PeakSampler()
                sampler.start()
                started = time.monotonic()
                try:
                    # The HTTP vertex uses only the attributes above of its StepRun.
                    result = http.run(cast(StepRun, step))
                    outcome = {"kind": result.kind, "error": result.error, "retryable": result.retryable}
                except NonRetryable as error:
                    outcome = {"kind": "failed", "error": str(error), "retryable": False}
                seconds = time.monotonic() - started
                sampler.stopped.set()
                sampler.join()
                raise _Rollback
        except _Rollback:
            pass
        return {
            "scenario": "oversized-response", "response_bytes": size, "max_response_bytes": cap,
            "outcome": outcome, "seconds": round(seconds, 3),
            "rss_before_mb": round(before / MB, 1), "rss_peak_mb": round(sampler.peak / MB, 1),
            "rss_growth_mb": round((sampler.peak - before) / MB, 1),
        }
