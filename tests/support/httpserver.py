"""A local HTTP server for destination tests: records requests and peak concurrency.

Paths: ``/ok`` echoes the JSON body (200); ``/status/<code>`` answers that code;
``/slow/<seconds>`` answers 200 after a delay; anything else 404.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.peak = 0

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _answer(self) -> None:
            recorder.enter()
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder.lock:
                    recorder.requests.append({"method": self.command, "path": self.path,
                                              "headers": dict(self.headers), "body": body})
                status, payload = self._route(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                recorder.leave()

        def _route(self, body: bytes) -> tuple[int, Any]:
            parts = self.path.strip("/").split("/")
            if parts[0] == "ok":
                return 200, {"echo": json.loads(body) if body else None, "path": self.path}
            if parts[0] == "status" and len(parts) > 1:
                return int(parts[1]), {"error": f"status {parts[1]}"}
            if parts[0] == "slow" and len(parts) > 1:
                time.sleep(float(parts[1]))
                return 200, {"slept": float(parts[1])}
            return 404, {"error": "no such path"}

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    return Handler


@contextmanager
def serve() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()
