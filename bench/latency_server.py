"""The far end of ``bench destination``: a loopback HTTP/1.1 server with a fixed latency.

No Django here: the server runs in a process of its own, started with ``spawn``, which
imports only this module."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from typing import Any, Self

import uvloop


class _Counts:
    """A LatencyServer's figures, kept by its one loop thread (no lock needed)."""

    FIELDS: tuple[str, ...] = ("in_flight", "peak", "answered", "busy", "changed_at", "first_at", "last_at",
                               "busy_by_second")

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.in_flight = self.peak = self.answered = 0
        self.busy = 0.0  # the integral of in_flight over time (slot-seconds used)
        self.changed_at = 0.0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.busy_by_second: list[float] = []  # ``busy`` per whole second since the first request

    def count(self, delta: int) -> None:
        now = time.monotonic()
        if self.changed_at:
            self.busy += self.in_flight * (now - self.changed_at)
            if self.in_flight and self.first_at is not None:
                self._spread(self.changed_at - self.first_at, now - self.first_at)
        self.changed_at = now
        self.in_flight += delta
        if delta > 0:
            self.peak = max(self.peak, self.in_flight)
            self.first_at = self.first_at or now

    def _spread(self, start: float, end: float) -> None:
        """Add ``in_flight`` over [start, end) (seconds since the first request) to the seconds it covers."""
        while start < end:
            second = int(start)
            upto = min(end, second + 1.0)
            while len(self.busy_by_second) <= second:
                self.busy_by_second.append(0.0)
            self.busy_by_second[second] += self.in_flight * (upto - start)
            start = upto


class LatencyServer(_Counts):
    """A keep-alive HTTP/1.1 server on 127.0.0.1 that answers every request with
    ``{"ok": true}`` after ``latency`` seconds, counting requests in flight.

    It is the far end of the calls, so it should disturb the engine as little as a remote
    server would: it runs in a process of its own (in the benchmark's process it would wait
    for the interpreter lock behind the progress polling, and its own delays would count as
    idle slots), as a bare ``asyncio.Protocol`` (no stream objects, no task per request)
    that frames requests by ``Content-Length`` and answers from a timer. Its figures arrive
    when it stops (monotonic clock times: one clock for every process)."""

    NAME = "bench-latency-server"

    def __init__(self, latency: float) -> None:
        super().__init__(latency)  # the figures, filled in by stop()
        self.port = 0
        self._pipe: Any = None
        self._process: Any = None

    def counts(self) -> tuple[_Counts, type[_Exchange]]:
        """What the server process keeps its figures in, and how it answers a connection
        (bench.fragile_server overrides both)."""
        return _Counts(self.latency), _Exchange

    def start(self) -> Self:
        context = multiprocessing.get_context("spawn")  # nothing of Django's state goes along
        self._pipe, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(*self.counts(), theirs), name=self.NAME, daemon=True)
        self._process.start()
        if not self._pipe.poll(30):
            raise RuntimeError(f"{self.NAME} did not start")
        self.port = self._pipe.recv()
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        try:
            self._pipe.send("stop")
            if self._pipe.poll(10):
                self.receive(self._pipe.recv())
        finally:
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
            self._process = None

    def receive(self, figures: dict[str, Any]) -> None:
        """The server process's figures, sent when it stops."""
        for name, value in figures.items():
            setattr(self, name, value)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _serve(counts: _Counts, exchange: type[_Exchange], pipe: Any) -> None:
    """The server process: report the port, serve until told to stop, report the counts."""
    # uvloop (libuv): the far end costs the measured machine's cores 0.04 ms a call instead of
    # asyncio's 0.065 (docs/performance-log.md, "Seventh pass"); a remote server would cost none.
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    server: asyncio.Server = loop.run_until_complete(
        loop.create_server(lambda: exchange(counts, loop), "127.0.0.1", 0, backlog=4096))
    pipe.send(server.sockets[0].getsockname()[1])
    loop.add_reader(pipe.fileno(), loop.stop)  # any message (or the parent gone) stops it
    loop.run_forever()
    server.close()
    pipe.send({name: getattr(counts, name) for name in counts.FIELDS})


ANSWER_BODY = b'{"ok": true}'
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
          % (len(ANSWER_BODY), ANSWER_BODY))


class _Exchange(asyncio.Protocol):
    """One client connection of a LatencyServer: each complete request is answered after the
    latency, in order (every request waits the same time, so timers fire in arrival order)."""

    def __init__(self, server: _Counts, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.waiting: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in bytes(self.buffer[:end]).split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return  # the body is still arriving
            del self.buffer[:end + 4 + length]
            self.request()

    def request(self) -> None:
        """One complete request has arrived: answer it after the latency."""
        self.server.count(+1)
        self.waiting.append(self.loop.call_later(self.server.latency, self._answer))

    def _answer(self) -> None:
        self.waiting.pop(0)
        self.server.count(-1)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(ANSWER)
            self.server.answered += 1
            self.server.last_at = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in self.waiting:  # requests the client gave up on
            timer.cancel()
            self.server.count(-1)
        self.waiting.clear()
        self.transport = None
