"""The event-loop transport of ``outbound.fetch_async``: HTTP/1.1 on asyncio streams, framed
by h11, with a keep-alive pool per destination.

Why not ``httpx.AsyncClient``: on this path a worker keeps hundreds of calls in flight on one
thread, and httpx's layers (client, transport, httpcore's pool, anyio) cost several times
the CPU of the call itself; the pool's bookkeeping alone grows with requests × connections
(docs/performance.md, "Destinations"). What is left here is the protocol (h11: the same
parser httpcore uses), the sockets (asyncio), and a list of idle connections.

It keeps ``outbound``'s contracts, which its callers and tests rely on:

- **Pinned addresses.** ``connect`` takes the addresses ``outbound`` has checked and opens a
  socket to one of them, never to a name; TLS verifies the certificate against the name.
- **No redirects, no proxies**: nothing here follows a ``Location`` or reads the environment.
- **Size.** ``Content-Length`` over the cap fails before the body is read; a body without one
  is counted as it arrives; one byte over fails the call and closes the connection.
- **Time.** The caller wraps the whole call in one ``asyncio.timeout``; a cancelled call
  closes its connection (it is never handed back half-read).

A connection goes back to its pool only after a complete exchange that both sides mean to
keep alive; one found closed, or idle past ``KEEPALIVE_EXPIRY``, is dropped. A request that
fails on a *reused* connection before any byte of the answer arrived (the server closed it
while it was idle) is sent once more on a new connection — the only case in which the server
cannot have seen it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import h11

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept
MAX_IDLE = 512  # idle connections kept per pool: a destination's limit bounds the calls in flight
READ_CHUNK = 65536
USER_AGENT = "SchemaBridge"


class TransportError(Exception):
    """The exchange failed at the network or protocol level (connect, reset, a malformed answer)."""


class RequestRefused(Exception):
    """The request cannot be sent as given (an invalid header, a URL without a host)."""


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    content: bytes = b""

    def header(self, name: bytes) -> str:
        """The first value of header ``name`` (lower case), or ''."""
        for key, value in self.headers:
            if key == name:
                return value.decode("latin-1")
        return ""


@dataclass
class Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))
    idle_since: float = 0.0

    def usable(self, now: float) -> bool:
        return (now - self.idle_since < KEEPALIVE_EXPIRY and not self.reader.at_eof()
                and not self.writer.is_closing() and self.reader.exception() is None)

    def close(self) -> None:
        self.writer.close()


# Idle connections per event loop and pool key; a loop that is gone takes its pools with it.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, list[Connection]]] = \
    weakref.WeakKeyDictionary()

_ssl_context: ssl.SSLContext | None = None


def ssl_context() -> ssl.SSLContext:
    """Certificates from certifi, as the blocking client (httpx) verifies them; built once."""
    global _ssl_context
    if _ssl_context is None:
        import httpx

        _ssl_context = httpx.create_ssl_context(trust_env=False)
    return _ssl_context


async def connect_to(addresses: Sequence[Any], port: int, *, tls_name: str | None) -> Connection:
    """A connection to the first of ``addresses`` (already checked) that answers; with TLS
    verified against ``tls_name`` when given. Raises TransportError when none does."""
    failure: BaseException | None = None
    for address in addresses:
        try:
            reader, writer = await asyncio.open_connection(
                str(address), port, ssl=ssl_context() if tls_name else None,
                server_hostname=tls_name, limit=READ_CHUNK * 4)
        except (OSError, ssl.SSLError) as error:
            failure = error
            continue
        return Connection(reader, writer)
    raise TransportError(_describe(failure) if failure else "no address to connect to")


async def exchange(pool_key: Any, connect: Callable[[], Awaitable[Connection]], method: str, target: bytes,
                   headers: list[tuple[str, str]], body: bytes, *, max_bytes: int,
                   too_large: Callable[[str], Exception]) -> Answer:
    """Send one request and read its answer, on an idle connection of ``pool_key`` or a new one
    from ``connect``. ``too_large(message)`` builds the error for a body over ``max_bytes``."""
    pool = _pools.setdefault(asyncio.get_running_loop(), {}).setdefault(pool_key, [])
    conn = _idle(pool)
    if conn is not None:
        try:
            return await _over(conn, pool, method, target, headers, body, max_bytes, too_large)
        except _StaleConnection:
            pass  # the server closed it while idle: it never saw the request
    return await _over(await connect(), pool, method, target, headers, body, max_bytes, too_large, fresh=True)


class _StaleConnection(Exception):
    pass


def _idle(pool: list[Connection]) -> Connection | None:
    now = time.monotonic()
    while pool:
        conn = pool.pop()
        if conn.usable(now):
            return conn
        conn.close()
    return None


async def _over(conn: Connection, pool: list[Connection], method: str, target: bytes,
                headers: list[tuple[str, str]], body: bytes, max_bytes: int,
                too_large: Callable[[str], Exception], *, fresh: bool = False) -> Answer:
    keep = False
    received = False
    try:
        protocol = conn.protocol
        try:
            data = protocol.send(h11.Request(method=method, target=target, headers=headers))
            if body:
                data += protocol.send(h11.Data(data=body))
            data += protocol.send(h11.EndOfMessage())
        except h11.LocalProtocolError as error:
            raise RequestRefused(f"the request is not valid HTTP/1.1: {error}") from None
        conn.writer.write(data or b"")
        await conn.writer.drain()
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                chunk = await conn.reader.read(READ_CHUNK)
                received = received or bool(chunk)
                protocol.receive_data(chunk)
                continue
            if isinstance(event, h11.Response):
                break
            if isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("the server closed the connection without answering")
            # An InformationalResponse (1xx) is skipped; nothing else comes before the answer.
        answer = Answer(event.status_code, list(event.headers))
        declared = answer.header(b"content-length")
        if declared.isdigit() and int(declared) > max_bytes:
            raise too_large(f"the response is {int(declared):,} bytes; the limit is {max_bytes:,}")
        if answer.header(b"content-encoding").strip().lower() not in ("", "identity"):
            return answer  # the caller refuses it; the body is never read (the connection closes)
        chunks: list[bytes] = []
        size = 0
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                protocol.receive_data(await conn.reader.read(READ_CHUNK))
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > max_bytes:
                    raise too_large(f"the response exceeded {max_bytes:,} bytes")
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed before the end: h11 raises for a short body; be safe
                raise h11.RemoteProtocolError("the server closed the connection mid-answer")
        answer.content = b"".join(chunks)
        if protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
            protocol.start_next_cycle()
            keep = True
        return answer
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, h11.RemoteProtocolError) as error:
        if not fresh and not received:
            raise _StaleConnection() from error
        raise TransportError(_describe(error)) from error
    finally:
        if keep and len(pool) < MAX_IDLE:
            conn.idle_since = time.monotonic()
            pool.append(conn)
        else:
            conn.close()


def _describe(error: BaseException) -> str:
    text = str(error) or "no detail"
    return f"{type(error).__name__}: {text}"


def json_bytes(value: Any) -> bytes:
    """A JSON body as httpx encodes one (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def close_all() -> None:
    """Close this loop's idle connections; call before the loop ends."""
    for pool in _pools.pop(asyncio.get_running_loop(), {}).values():
        for conn in pool:
            conn.close()
