"""A deliberately awkward HTTP/1.1 server on 127.0.0.1 for the transport conformance suite
(tests/integration/test_transport_conformance.py): each behaviour is a scenario written out
byte by byte, so what the client meets is exact.

The server runs on the test's own event loop (the transport under test runs there too). It
counts the connections it accepted and keeps every request it read in full (head and body),
so a test can say how many times a request reached it — the one thing a client must get
right when it considers sending a request again.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

Scenario = Callable[["Connection"], Awaitable[None]]


class Connection:
    """One accepted connection: read requests, write raw bytes."""

    def __init__(self, server: AwkwardServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 number: int) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.number = number  # 1 for the first connection the server accepted

    async def request(self) -> bytes:
        """The next request (head and body, by its Content-Length), recorded on the server;
        raises asyncio.IncompleteReadError when the client closes first."""
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        request = head + (await self.reader.readexactly(length) if length else b"")
        self.server.requests.append(request)
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()


def answer(body: bytes = b"{}", *, status: str = "200 OK", headers: bytes = b"") -> bytes:
    """A complete answer with a Content-Length (and any extra header lines, CRLF-terminated)."""
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n" + headers
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


class AwkwardServer:
    """``async with AwkwardServer(scenario) as server``: ``scenario(connection)`` runs for each
    accepted connection; the connection closes when it returns. With ``tls``, it speaks
    HTTPS (``url`` still says http://127.0.0.1)."""

    def __init__(self, scenario: Scenario, *, tls: ssl.SSLContext | None = None) -> None:
        self.scenario = scenario
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> AwkwardServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def methods(self) -> list[str]:
        """The method of every request read, in order."""
        return [request.split(b" ", 1)[0].decode() for request in self.requests]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.scenario(Connection(self, reader, writer, self.connections))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up, which several scenarios expect
        except asyncio.CancelledError:
            pass  # the test's loop is ending
        finally:
            writer.close()


async def keep_alive(conn: Connection) -> None:
    """Answer every request on the connection, keeping it open."""
    while True:
        await conn.request()
        await conn.send(answer(b'{"n": %d}' % len(conn.server.requests)))
