"""The far end of ``bench flow``: a loopback API that pushes back (issue 29 §5).

A LatencyServer (bench/latency_server.py: its own process, a bare ``asyncio.Protocol`` on
uvloop, in-flight counting) whose answer to each request depends on a mode:

- ``rate``: it allows ``rate`` requests per sliding second. A request that finds ``rate``
  requests accepted in the last second gets ``429`` at once, with ``Retry-After`` the whole
  seconds until the oldest of them leaves the window (rounded up, so never too early; with a
  one-second window always ``1``). Throttled requests take no place in the window. A request
  that arrives before a ``Retry-After`` this server issued has run out is counted as
  ``early`` (it is answered by the window like any other).
- ``capacity``: it holds up to ``capacity`` requests at once, each answered after the
  latency; a request beyond them gets ``503`` at once, without ``Retry-After``.
- ``outage``: it answers normally until it has accepted ``outage_after`` requests, then
  answers every request with ``500`` (after the latency, as a backend failing behind it
  would) for ``outage_seconds``, then recovers.

Each accepted request is answered with ``200 {"ok": true}`` after the latency. Figures, by
arrival: ``calls`` = ``ok`` + ``throttled`` (429/503) + ``errors`` (500); ``abandoned``
requests were left unanswered when their client closed the connection. Times are seconds since
the first request (``arrivals`` are wall-clock times, to compare with database timestamps).

No Django here either: the server process imports only this module and latency_server.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from typing import Any

from bench.latency_server import ANSWER, LatencyServer, _Counts, _Exchange

MODES = ("rate", "capacity", "outage")


def _answer(status: bytes, body: bytes, *headers: bytes) -> bytes:
    head = b"".join(header + b"\r\n" for header in headers)
    return (b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
            % (status, head, len(body), body))


UNAVAILABLE = _answer(b"503 Service Unavailable", b'{"error": "over capacity"}')
FAILING = _answer(b"500 Internal Server Error", b'{"error": "outage"}')


def too_many(retry_after: int) -> bytes:
    return _answer(b"429 Too Many Requests", b'{"error": "rate limited"}', b"Retry-After: %d" % retry_after)


class _Fragile(_Counts):
    """A FragileServer's rules and figures, kept by its one loop thread."""

    FIELDS = (*_Counts.FIELDS, "calls", "ok", "throttled", "errors", "abandoned", "early", "first_wall", "arrivals",
              "ok_by_second", "throttled_by_second", "max_window", "max_accepted", "outage_from", "outage_until",
              "calls_during_outage", "retry_after_max")

    def __init__(self, mode: str, latency: float, *, rate: int = 0, capacity: int = 0, outage_after: int = 0,
                 outage_seconds: float = 0.0, window: float = 1.0) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        super().__init__(latency)
        self.mode, self.rate, self.capacity, self.window = mode, rate, capacity, window
        self.outage_after, self.outage_seconds = outage_after, outage_seconds
        self.calls = self.ok = self.throttled = self.errors = self.abandoned = self.early = 0
        self.first_wall: float | None = None
        self.arrivals: list[float] = []  # wall-clock time of every request
        self.ok_by_second: list[int] = []  # accepted requests per second of arrival
        self.throttled_by_second: list[int] = []
        self.accepted_at: collections.deque[float] = collections.deque()  # rate: the sliding window
        self.asked_until = 0.0  # rate: the end of the latest Retry-After issued (monotonic)
        self.retry_after_max = 0
        self.max_window = 0  # rate: the most requests ever accepted within one window
        self.accepted = self.max_accepted = 0  # capacity: accepted requests held now, and at most
        self.outage_from: float | None = None  # outage: seconds since the first request
        self.outage_until: float | None = None
        self.calls_during_outage = 0

    def arrive(self, now: float) -> tuple[float, bytes, str]:
        """A request arrives (after ``count(+1)``): its delay, answer and kind (ok/throttled/error)."""
        wall = time.time()
        self.first_wall = self.first_wall or wall
        self.arrivals.append(wall)
        self.calls += 1
        second = int(now - (self.first_at or now))
        while len(self.ok_by_second) <= second:
            self.ok_by_second.append(0)
            self.throttled_by_second.append(0)
        delay, answer, kind = getattr(self, f"_{self.mode}")(now)
        if kind == "ok":
            self.ok += 1
            self.ok_by_second[second] += 1
        elif kind == "throttled":
            self.throttled += 1
            self.throttled_by_second[second] += 1
        else:
            self.errors += 1
        return delay, answer, kind

    def finish(self, kind: str) -> None:
        """A request's answer was sent, or its client left."""
        if self.mode == "capacity" and kind == "ok":
            self.accepted -= 1

    def _rate(self, now: float) -> tuple[float, bytes, str]:
        if now < self.asked_until:
            self.early += 1
        while self.accepted_at and self.accepted_at[0] <= now - self.window:
            self.accepted_at.popleft()
        if len(self.accepted_at) < self.rate:
            self.accepted_at.append(now)
            self.max_window = max(self.max_window, len(self.accepted_at))
            return self.latency, ANSWER, "ok"
        retry_after = max(1, math.ceil(self.accepted_at[0] + self.window - now))
        self.asked_until = max(self.asked_until, now + retry_after)
        self.retry_after_max = max(self.retry_after_max, retry_after)
        return 0.0, too_many(retry_after), "throttled"

    def _capacity(self, now: float) -> tuple[float, bytes, str]:
        if self.accepted >= self.capacity:
            return 0.0, UNAVAILABLE, "throttled"
        self.accepted += 1
        self.max_accepted = max(self.max_accepted, self.accepted)
        return self.latency, ANSWER, "ok"

    def _outage(self, now: float) -> tuple[float, bytes, str]:
        since = now - (self.first_at or now)
        if self.outage_from is None and self.ok >= self.outage_after:
            self.outage_from, self.outage_until = since, since + self.outage_seconds
        if self.outage_from is not None and self.outage_until is not None and since < self.outage_until:
            self.calls_during_outage += 1
            return self.latency, FAILING, "error"
        return self.latency, ANSWER, "ok"


class _FragileExchange(_Exchange):
    """One client connection of a FragileServer. Answers go out in request order: each is due
    no earlier than the one before it on the connection (a client that does not pipeline, as
    the engine's, never has two waiting)."""

    server: _Fragile

    def __init__(self, server: _Fragile, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(server, loop)
        self.kinds: list[str] = []
        self.due = 0.0

    def request(self) -> None:
        self.server.count(+1)
        delay, answer, kind = self.server.arrive(time.monotonic())
        self.due = max(self.due, self.loop.time() + delay)
        self.kinds.append(kind)
        self.waiting.append(self.loop.call_at(self.due, self._reply, answer))

    def _reply(self, answer: bytes) -> None:
        self.waiting.pop(0)
        self.server.finish(self.kinds.pop(0))
        self.server.count(-1)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(answer)
            self.server.answered += 1
            self.server.last_at = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        for kind in self.kinds:
            self.server.finish(kind)
            self.server.abandoned += 1
        self.kinds.clear()
        super().connection_lost(exc)


class FragileServer(LatencyServer):
    """A fragile API on 127.0.0.1 in a process of its own (see the module's docstring); its
    figures are in ``figures`` once it has stopped."""

    NAME = "bench-fragile-server"

    def __init__(self, mode: str, latency: float, **rules: Any) -> None:
        super().__init__(latency)
        self.mode, self.rules = mode, rules
        self.figures = _Fragile(mode, latency, **rules)  # checks the rules; filled in by stop()

    def counts(self) -> tuple[_Counts, type[_Exchange]]:
        return _Fragile(self.mode, self.latency, **self.rules), _FragileExchange

    def receive(self, figures: dict[str, Any]) -> None:
        for name, value in figures.items():
            setattr(self.figures, name, value)
