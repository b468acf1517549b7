"""A local HTTP server for destination tests: records requests and peak concurrency.

Paths: ``/ok`` echoes the JSON body (200); ``/status/<code>`` answers that code;
``/slow/<seconds>`` answers 200 after a delay; ``/big/<bytes>`` sends that many bytes
(``/big/<bytes>/unsized``: without a Content-Length, until the connection closes);
``/trickle/<seconds>`` sends one byte every 50 ms for that long; ``/hold`` (also as the last
segment: ``/v1/hold``) answers 200 once the test sets ``recorder.released`` (the test decides
when a call ends); ``/echo-headers/<code>[/<n>]``
answers that code quoting the request's Authorization and X-Api-Key (after n characters of
padding); ``/redirect?to=<url>`` answers 302 to ``url``; ``/gzip`` answers a gzip-compressed
body whatever was asked; ``/scripted`` answers what the test's ``recorder.script(n)`` returns for
the n-th scripted request (0 first): ``(status, headers)``, and it may block first (flow-control
tests); anything else 404 (with a long body). Each request is recorded with its arrival time
(``at``, epoch seconds).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.peak = 0
        self.released = threading.Event()  # ``/hold`` answers once it is set
        self.script: Callable[[int], tuple[int, dict[str, str]]] = lambda n: (200, {})
        self.scripted = 0  # ``/scripted`` requests so far

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog (5) drops part of a burst of concurrent connects, which
    # then retry a second later: tests that count calls in flight need them all at once.
    request_queue_size = 256


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _answer(self) -> None:
            recorder.enter()
            left = False
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder.lock:
                    recorder.requests.append({"method": self.command, "path": self.path,
                                              "headers": dict(self.headers), "body": body, "at": time.time()})
                if self._stream():
                    return
                status, payload = self._route(body)
                data = json.dumps(payload).encode()
                # The call ends for the client as these bytes arrive, and it may send its next
                # request at once: count this one out before answering, or a fast client's next
                # request can be counted while this thread has not yet got back from the write.
                recorder.leave()
                left = True
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                if not left:
                    recorder.leave()

        def _stream(self) -> bool:
            """Answer the paths whose bodies are not one JSON document; False for the others."""
            parts = self.path.strip("/").split("?")[0].split("/")
            if parts[0] == "big":
                size = int(parts[1])
                self._head(200, "application/octet-stream", None if parts[-1] == "unsized" else size)
                block = b"x" * 65536
                try:
                    for start in range(0, size, len(block)):
                        self.wfile.write(block[:min(len(block), size - start)])
                except OSError:
                    pass  # the client hung up, as it should past its cap
                return True
            if parts[0] == "trickle":
                self._head(200, "text/plain", None)
                until = time.monotonic() + float(parts[1])
                try:
                    while time.monotonic() < until:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.05)
                except OSError:
                    pass
                return True
            if parts[0] == "redirect":
                self.send_response(302)
                self.send_header("Location", self.path.split("to=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
            if parts[0] == "scripted":
                with recorder.lock:
                    n, recorder.scripted = recorder.scripted, recorder.scripted + 1
                status, headers = recorder.script(n)
                data = json.dumps({"n": n}).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True
            if parts[0] == "gzip":
                data = gzip.compress(b'{"zipped": true}')
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True
            return False

        def _head(self, status: int, content_type: str, length: int | None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if length is not None:  # else (HTTP/1.0) the body ends when the connection closes
                self.send_header("Content-Length", str(length))
            self.end_headers()

        def _route(self, body: bytes) -> tuple[int, Any]:
            parts = self.path.strip("/").split("/")
            if parts[0] == "ok":
                return 200, {"echo": json.loads(body) if body else None, "path": self.path}
            if parts[0] == "echo-headers" and len(parts) > 1:  # e.g. a server that quotes the request back
                quoted = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "x-api-key")}
                if len(parts) > 2:  # /echo-headers/<code>/<n>: n characters of padding first
                    return int(parts[1]), {"pad": "p" * int(parts[2]), "got": quoted}
                return int(parts[1]), {"got": quoted}
            if parts[0] == "status" and len(parts) > 1:
                return int(parts[1]), {"error": f"status {parts[1]}"}
            if parts[-1] == "hold":  # also under a base URL's path (``/v1/hold``)
                released = recorder.released.wait(30)
                return (200, {"held": True}) if released else (504, {"error": "never released"})
            if parts[0] == "slow" and len(parts) > 1:
                time.sleep(float(parts[1]))
                return 200, {"slept": float(parts[1])}
            return 404, {"error": "no such path", "detail": "x" * 1000}

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    return Handler


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a loopback port, on a thread, until the block ends; yields its URL."""
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serve() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    with serving(_handler(recorder)) as url:
        yield url, recorder
