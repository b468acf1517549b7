"""The event-loop transport of ``outbound.fetch_async``: HTTP/1.1 on asyncio sockets (a
protocol per connection), with a keep-alive pool per destination. Requests are written here
(their parts checked first); answers are framed by ``httptools`` (llhttp, the C parser
Node.js uses).

Why not ``httpx.AsyncClient``: on this path a worker keeps hundreds of calls in flight on one
thread, and httpx's layers (client, transport, httpcore's pool, anyio) cost several times
the CPU of the call itself; the pool's bookkeeping alone grows with requests × connections
(docs/performance-log.md, "Destinations"). What is left here is the protocol, the sockets
(asyncio), and a list of idle connections. The protocol was h11 (the pure-Python parser
httpcore uses) until it cost 125 µs per exchange, most of an HTTP step's time on the loop;
writing the request and parsing the answer with llhttp costs about 5 µs (docs/performance.md,
"Fifth pass").

It keeps ``outbound``'s contracts, which its callers and tests rely on:

- **Pinned addresses.** ``connect`` takes the addresses ``outbound`` has checked and opens a
  socket to one of them, never to a name; TLS verifies the certificate against the name.
- **No redirects, no proxies**: nothing here follows a ``Location`` or reads the environment.
- **Size.** ``Content-Length`` over the cap fails before the body is read; a body without one
  is counted as it arrives; one byte over fails the call and closes the connection. An
  answer's head, and its trailer fields, may take ``MAX_HEADER_BYTES`` (64 KiB; the head one
  read more): a server that never ends its head fails the call instead of filling memory.
- **Time.** The caller wraps the whole call in one ``asyncio.timeout``; a cancelled call
  closes its connection (it is never handed back half-read).

A connection goes back to its pool only after a complete exchange that both sides mean to
keep alive; one found closed, or idle past ``KEEPALIVE_EXPIRY``, is dropped.

**Sending again.** A request that fails on a *reused* connection before any byte of the
answer arrived is sent once more on a new connection only when that cannot act twice: its
method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or it carries an
``Idempotency-Key`` (every HTTP step's does: the server drops the repeat). The failure
usually means the server closed the connection while it was idle, but not always: a server
may have read the request, acted on it, and dropped the connection before answering (RFC
9112 §9.3.1). Any other request fails the call, and the step's ``retry`` decides.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import ssl
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httptools

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept
MAX_IDLE = 512  # idle connections kept per pool: a destination's limit bounds the calls in flight
MAX_HEADER_BYTES = 65536  # an answer's head (status line and fields), and its trailer fields, at most
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


class _Socket(asyncio.Protocol):
    """One connection's socket events, kept for the exchange that reads it: the chunks that
    arrived, the end of the connection, and a waiter that the next event wakes.

    Not asyncio's StreamReader and StreamWriter: their buffer copies every chunk twice (in
    and out of a bytearray), and each read and each ``drain`` is a coroutine with a future
    of its own; with them (and the request's parts checked for every call) a call cost the
    loop 265k instructions, now 206k (callgrind; docs/performance-log.md, "Ninth pass"). The
    framing logic (``_over``) is the same."""

    __slots__ = ("chunks", "eof", "error", "transport", "waiter")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        self.eof = False  # the server ended its side, or the connection is gone
        self.error: BaseException | None = None  # why the connection was lost, if not cleanly
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport (create_connection)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None  # the transport closes itself: nothing is written after the answer's end

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = self.error or exc
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self) -> bytes:
        """The bytes that arrived since the last read (waiting for some); b"" at the end of
        the connection, or its error if it was lost with one."""
        while not self.chunks:
            if self.eof:
                if self.error is not None:
                    raise self.error
                return b""
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        chunks, self.chunks = self.chunks, []
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class Connection:
    """A connection of a pool: its transport and the socket events of ``_Socket``."""

    __slots__ = ("idle_since", "socket", "transport")

    def __init__(self, transport: asyncio.Transport, socket: _Socket) -> None:
        self.transport = transport
        self.socket = socket
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        """Reusable: not idle past KEEPALIVE_EXPIRY, not closed or closing, and nothing arrived
        while it was idle (an answer to no request: the server is out of step)."""
        socket = self.socket
        return (now - self.idle_since < KEEPALIVE_EXPIRY and not socket.eof and not socket.chunks
                and not self.transport.is_closing())

    def close(self) -> None:
        self.transport.close()


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
            transport, socket = await asyncio.get_running_loop().create_connection(
                _Socket, str(address), port, ssl=ssl_context() if tls_name else None, server_hostname=tls_name)
        except (OSError, ssl.SSLError) as error:
            failure = error
            continue
        return Connection(transport, socket)
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
        except _StaleConnection as stale:
            # Asked only now, when it failed: the calls that do not fail pay nothing for it.
            if not may_send_again(method, headers):
                cause = stale.__cause__ or stale
                raise TransportError(_describe(cause)) from cause
    return await _over(await connect(), pool, method, target, headers, body, max_bytes, too_large, fresh=True)


IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})  # RFC 9110 §9.2.2


def may_send_again(method: str, headers: list[tuple[str, str]]) -> bool:
    """Whether a request that may have reached the server can be sent once more: its method is
    idempotent, or it carries an ``Idempotency-Key`` (the server recognises the repeat)."""
    return method in IDEMPOTENT_METHODS or any(name.lower() == "idempotency-key" for name, _ in headers)


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


# RFC 9110: a method and a header name are tokens; a field value has no CR, LF or NUL (and no
# whitespace at either end, which a parser would strip); a request target has no whitespace
# or control character (it comes percent-encoded from outbound._target).
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(rb"(?:[^\x00-\x20\x7f](?:[^\x00-\x08\x0a-\x1f\x7f]*[^\x00-\x20\x7f])?)?")
_TARGET = re.compile(rb"[^\x00-\x20\x7f]+")


def request_bytes(method: str, target: bytes, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The request as sent: its line, its headers in order, the body (the caller has set
    Host and Content-Length). Raises RequestRefused for anything that could not be framed as
    given — a line break in a header value would start a header of the caller's choosing."""
    return b"".join([_request_line(method, target), *[_field(name, value) for name, value in headers], b"\r\n", body])


# Both checks are cached: a step's calls send the same line and nearly the same fields every
# time (only the idempotency key and the length change), and checking each part against its
# pattern cost more than the rest of writing the request (checking every value again: +3% of a
# worker's instructions per HTTP child). A refusal raises, so it is never cached. A cached
# line may carry a destination's credential (its Authorization header): the worker holds the
# key that unseals every credential anyway (docs/security.md), so this keeps nothing secret
# that its memory did not hold already.
@functools.lru_cache(maxsize=1024)
def _request_line(method: str, target: bytes) -> bytes:
    raw_method = method.encode("ascii", "replace")
    if not _TOKEN.fullmatch(raw_method):
        raise RequestRefused(f"the request is not valid HTTP/1.1: method {method!r}")
    if not _TARGET.fullmatch(target):
        raise RequestRefused(f"the request is not valid HTTP/1.1: target {target!r}")
    return raw_method + b" " + target + b" HTTP/1.1\r\n"


@functools.lru_cache(maxsize=4096)
def _field(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode("latin-1", "replace"), value.encode("latin-1", "replace")
    if not _TOKEN.fullmatch(raw_name):
        raise RequestRefused(f"the request is not valid HTTP/1.1: header name {name!r}")
    if not _FIELD_VALUE.fullmatch(raw_value):
        raise RequestRefused(f"the request is not valid HTTP/1.1: the value of header {name!r}")
    return raw_name + b": " + raw_value + b"\r\n"


class _Reading:
    """httptools' callbacks for one answer: its status, headers and body as they arrive.
    Interim answers (1xx) are skipped; ``done`` once the final one has ended."""

    __slots__ = ("after", "chunks", "done", "head_size", "headers", "headers_done", "keep_alive", "parser", "size",
                 "trailer_size")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.size = 0
        self.head_size = 0  # bytes read before the head ended (at most MAX_HEADER_BYTES + one read)
        self.trailer_size = 0  # bytes of trailer fields (at most MAX_HEADER_BYTES)
        self.headers_done = False  # the final answer's headers are complete
        self.done = False
        self.after = False  # bytes came after the answer ended: the connection is not reused
        self.keep_alive = False  # both sides mean to keep the connection (asked at the answer's end)

    def on_message_begin(self) -> None:
        self.after = self.after or self.done

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.headers_done:  # a trailer field (the head's bytes are counted as they arrive)
            self.trailer_size += len(name) + len(value) + 4
            if self.trailer_size > MAX_HEADER_BYTES:
                return  # the exchange fails after this read (_over)
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        if not self.done:
            self.headers_done = not self._interim()

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.size += len(body)
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.done:
            return
        if self._interim():  # a 1xx: its headers are not the answer's
            self.headers.clear()
        else:
            self.done = True
            self.keep_alive = self.parser.should_keep_alive()

    def _interim(self) -> bool:
        return 100 <= self.parser.get_status_code() < 200

    def body_to_eof(self) -> bool:
        """The answer's body runs to the end of the connection (no length, not chunked)."""
        return not any(name in (b"content-length", b"transfer-encoding") for name, _ in self.headers)


async def _over(conn: Connection, pool: list[Connection], method: str, target: bytes,
                headers: list[tuple[str, str]], body: bytes, max_bytes: int,
                too_large: Callable[[str], Exception], *, fresh: bool = False) -> Answer:
    """One exchange on ``conn``. On a reused connection (not ``fresh``) a failure before any
    answer byte raises _StaleConnection: ``exchange`` decides whether to send it again."""
    keep = False
    received = False
    try:
        # Written without waiting for the transport to drain: the request is in memory already,
        # and the answer may begin before the server has read all of it.
        conn.transport.write(request_bytes(method, target, headers, body))
        reading = _Reading()
        checked = False
        while not reading.done:
            chunk = await conn.socket.read()
            if not chunk:
                if reading.headers_done and reading.body_to_eof():
                    break  # the end of the connection ends the body (never reused)
                raise ConnectionResetError("the server closed the connection "
                                           + ("mid-answer" if received else "without answering"))
            received = True
            if not reading.headers_done:  # a head that never ends (one endless field included)
                if reading.head_size > MAX_HEADER_BYTES:
                    raise _head_too_large()
                reading.head_size += len(chunk)
            try:  # a bad answer fails this call as a transport error (retryable); its connection closes
                reading.parser.feed_data(chunk)
            except httptools.HttpParserUpgrade:
                raise _ProtocolError("the server switched protocols, which was not asked for") from None
            except httptools.HttpParserError as error:
                raise _ProtocolError(f"a malformed answer ({error})") from None
            if reading.trailer_size > MAX_HEADER_BYTES:
                raise _head_too_large()
            if reading.headers_done and not checked:
                checked = True
                answer = Answer(reading.parser.get_status_code(), reading.headers)
                declared = answer.header(b"content-length")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise too_large(f"the response is {int(declared):,} bytes; the limit is {max_bytes:,}")
                if answer.header(b"content-encoding").strip().lower() not in ("", "identity"):
                    return answer  # the caller refuses it; the body is never read (the connection closes)
                if method == "HEAD":
                    return answer  # no body follows, whatever the headers say (not reused)
            if reading.size > max_bytes:
                raise too_large(f"the response exceeded {max_bytes:,} bytes")
        answer = Answer(reading.parser.get_status_code(), reading.headers, b"".join(reading.chunks))
        keep = reading.done and not reading.after and reading.keep_alive
        return answer
    except (OSError, ssl.SSLError, _ProtocolError) as error:
        if not fresh and not received:
            raise _StaleConnection() from error
        raise TransportError(_describe(error)) from error
    finally:
        if keep and len(pool) < MAX_IDLE:
            conn.idle_since = time.monotonic()
            pool.append(conn)
        else:
            conn.close()


class _ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 answer."""


def _head_too_large() -> _ProtocolError:
    return _ProtocolError(f"the answer's header fields exceed {MAX_HEADER_BYTES:,} bytes")


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
