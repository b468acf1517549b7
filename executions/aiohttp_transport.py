"""The transport of ``outbound.fetch_async``: aiohttp's client (HTTP/1.1 framed by llhttp, the
C parser Node.js uses; keep-alive pools in its connector), configured to keep ``outbound``'s
contracts. aiohttp carries the protocol and has an upstream security process; what is ours
is the configuration below and the checks around it (docs/security.md, "Outbound HTTP").

- **Pinned addresses.** The connector's resolver is ``_CheckedResolver``: it answers only
  the addresses ``outbound.allowed_addresses_async`` has checked, and aiohttp connects to
  exactly those (in order, one after the other: no happy-eyeballs race), never to the name;
  TLS verifies the certificate against the name. Its DNS cache is off, so every new
  connection is a fresh lookup and a fresh check. aiohttp skips the resolver for an IP
  literal, so a literal host is checked here before the call.
- **No redirects** (``allow_redirects=False``: a 3xx is the answer), **no environment
  proxies** (``trust_env=False``), **no cookies** (a ``DummyCookieJar``: nothing a server
  sets is sent to anyone), **no automatic decompression** (``auto_decompress=False`` and
  ``Accept-Encoding: identity``; a compressed answer is refused unread).
- **Size.** A ``Content-Length`` over the cap fails before the body is read; otherwise the
  body is read as it arrives (aiohttp's reads of at most ``READ_BUFSIZE``) and one byte over
  the cap fails the call and closes the connection. A head may have ``max_headers`` (128)
  fields of at most 8190 bytes each (aiohttp's defaults): a bigger or endless head fails the
  call as a transport error.
- **Time.** One ``asyncio.timeout`` covers the whole call (the lookup, connecting, TLS,
  sending, the head and every read of the body); aiohttp's own timeouts are off, so no
  second, rounded deadline applies. A cancelled call closes its connection.
- **Sending again.** aiohttp sends a request once more, on a new connection, only when its
  method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and the connection failed
  before the answer's head (RFC 9112 §9.3.1); a POST or PATCH is sent once. Nothing here
  sends a request again.
- **Requests are checked before they are sent**: the method is a token, every header name
  a token, and no value holds a control character (CR, LF and NUL included), DEL, or
  whitespace at either end — a line break in a value would start a header of the sender's
  choosing.

One ``ClientSession`` per event loop (a worker has one loop for its HTTP steps): its
connector pools connections per host, port and TLS, with no overall limit (a destination's
slots bound its calls in flight), and drops one idle past ``KEEPALIVE_EXPIRY``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import socket
import ssl
import weakref
from typing import Any

import aiohttp
import certifi
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from executions import outbound

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept
READ_BUFSIZE = 2**16  # the most one read of the body returns
USER_AGENT = "SchemaBridge"

# The framing and the encoding are ours: a caller's headers of these names are dropped.
_FRAMING = frozenset({"accept-encoding", "content-length", "transfer-encoding"})


class _CheckedResolver(AbstractResolver):
    """Resolves a name to the addresses the outbound policy allows, and to no other."""

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        addresses = await outbound.allowed_addresses_async(host, port)
        return [{"hostname": host, "host": str(address), "port": port,
                 "family": socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST} for address in addresses]

    async def close(self) -> None:
        return None


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1)
def ssl_context() -> ssl.SSLContext:
    """Certificates from certifi (not the environment's SSL_CERT_FILE); built once."""
    return ssl.create_default_context(cafile=certifi.where())


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(
            resolver=_CheckedResolver(), use_dns_cache=False, ssl=ssl_context(), limit=0, limit_per_host=0,
            keepalive_timeout=KEEPALIVE_EXPIRY, happy_eyeballs_delay=None)
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_connect=None,
                                                               sock_read=None),
            auto_decompress=False, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
            read_bufsize=READ_BUFSIZE, skip_auto_headers=("Content-Type",), raise_for_status=False)
    return session


async def close() -> None:
    """Close this loop's session and its idle connections; call before the loop ends."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


async def fetch(method: str, url: str, *, json_body: Any = None, headers: dict[str, str] | None = None,
                timeout: float, max_bytes: int) -> outbound.Fetched:
    """One call under ``outbound``'s contracts. Raises outbound.OutboundError subclasses."""
    target = _target(url)
    body = json_bytes(json_body) if json_body is not None else None
    sent = _headers(target.host_header, tuple((headers or {}).items()), body is not None)
    _check_method(method)
    try:
        # One deadline for the whole call: resolving, connecting, TLS, sending, every read.
        async with asyncio.timeout(timeout):
            if target.literal:
                outbound.check_address(target.host)
            response = await _session().request(method, target.url, data=body, headers=sent,
                                                allow_redirects=False)
            try:
                content = await _read(response, max_bytes)
            except BaseException:
                response.close()  # never handed back to the pool half-read
                raise
            response.release()
    except TimeoutError as error:
        raise outbound.DeadlineExceeded(f"timed out after {timeout:g}s") from error
    except aiohttp.ClientConnectorError as error:
        raise outbound.TransportError(_describe(error.os_error)) from error
    except aiohttp.ServerDisconnectedError as error:
        raise outbound.TransportError("the server closed the connection without answering") from error
    except aiohttp.ClientResponseError as error:  # a malformed or oversized head
        raise outbound.TransportError(f"a malformed answer ({error.message})") from error
    except aiohttp.ClientPayloadError as error:
        raise outbound.TransportError(f"the answer's body broke off ({error})") from error
    except (aiohttp.ClientError, OSError) as error:
        raise outbound.TransportError(_describe(error)) from error
    return outbound.Fetched(response.status, content, response.headers.get("Content-Type", ""))


async def _read(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise outbound.UnsupportedEncoding(f"the response is compressed ({encoding}) although "
                                           f"'Accept-Encoding: identity' was asked for")
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise outbound.ResponseTooLarge(f"the response is {declared:,} bytes; the limit is {max_bytes:,}")
    # Chunks are kept as they come (no growing buffer that copies as it grows), so an
    # oversized body costs at most max_bytes + one read before it is refused.
    chunks: list[bytes] = []
    received = 0
    content = response.content
    while chunk := await content.readany():
        received += len(chunk)
        if received > max_bytes:
            raise outbound.ResponseTooLarge(f"the response exceeded {max_bytes:,} bytes")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _describe(error: BaseException) -> str:
    text = str(error) or "no detail"
    return f"{type(error).__name__}: {text}"


def json_bytes(value: Any) -> bytes:
    """A JSON body, compact and UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# --- where a URL points ------------------------------------------------------------------------

class _Target:
    __slots__ = ("host", "host_header", "literal", "port", "url")

    def __init__(self, parsed: Any) -> None:
        self.host: str = parsed.host
        self.port: int = parsed.port
        self.host_header: str = parsed.host_header
        self.literal = outbound.is_literal(self.host)
        scheme = "https" if parsed.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        # Already percent-encoded (outbound's parse): aiohttp sends the path as given.
        self.url = URL(f"{scheme}://{host}:{self.port}{parsed.path.decode('ascii')}", encoded=True)


@functools.lru_cache(maxsize=4096)
def _target(url: str) -> _Target:
    return _Target(outbound.parse_url(url))


# --- what may be sent --------------------------------------------------------------------------

# RFC 9110: a method and a header name are tokens; a field value has no control character
# (HTAB aside) and no whitespace at either end, which a parser would strip.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"(?:[^\x00-\x20\x7f](?:[^\x00-\x08\x0a-\x1f\x7f]*[^\x00-\x20\x7f])?)?")


# Both checks are cached: a step's calls send the same method and nearly the same fields every
# time. A refusal raises, so it is never cached. A cached field may carry a destination's
# credential (its Authorization header): the worker holds the key that unseals every
# credential anyway (docs/security.md), so this keeps nothing its memory did not hold already.
@functools.lru_cache(maxsize=64)
def _check_method(method: str) -> None:
    if not _TOKEN.fullmatch(method):
        raise outbound.InvalidRequest(f"the request is not valid HTTP/1.1: method {method!r}")


@functools.lru_cache(maxsize=4096)
def _check_field(name: str, value: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise outbound.InvalidRequest(f"the request is not valid HTTP/1.1: header name {name!r}")
    if not _FIELD_VALUE.fullmatch(value):
        raise outbound.InvalidRequest(f"the request is not valid HTTP/1.1: the value of header {name!r}")


def _headers(host_header: str, given: tuple[tuple[str, str], ...], json_body: bool) -> dict[str, str]:
    """The headers sent: the caller's (checked; ours win for framing and encoding), and the
    defaults they do not replace."""
    for name, value in given:
        _check_field(name, value)
    sent = dict(_defaults(host_header, frozenset(name.lower() for name, _ in given), json_body))
    sent.update((name, value) for name, value in given if name.lower() not in _FRAMING)
    sent["Accept-Encoding"] = "identity"
    return sent


@functools.lru_cache(maxsize=1024)
def _defaults(host_header: str, replaced: frozenset[str], json_body: bool) -> tuple[tuple[str, str], ...]:
    """The default headers that the caller's (named ``replaced``, in lower case) do not
    replace; worked out once per host and set of names, not for every call."""
    defaults = [("Host", host_header), ("User-Agent", USER_AGENT), ("Accept", "*/*")]
    if json_body:
        defaults.append(("Content-Type", "application/json"))
    return tuple((name, value) for name, value in defaults if name.lower() not in replaced)
