"""Outbound HTTP safety: every call a destination makes goes through ``fetch_async`` (or
``fetch``, the same call for a thread without an event loop), carried by ``http11``.

Contracts (docs/security.md, "Outbound HTTP"):

- **Addresses.** A host name is resolved once, at connect time; only a public unicast address
  may be reached (not loopback, link-local, private, shared, reserved, multicast or
  unspecified; IPv4-mapped and 6to4 IPv6 addresses are judged by the IPv4 address inside).
  ``SB_OUTBOUND_ALLOW`` (comma-separated CIDRs and host names) opens chosen networks and hosts.
  The socket is connected to the address that was checked, so a second DNS answer cannot
  redirect it (no rebinding window); TLS still verifies the certificate against the name.
- **Redirects** are never followed: a 3xx is the response. Proxies from the environment are
  ignored (a proxy would connect on our behalf, past the address check).
- **Size.** The body is read in chunks up to ``max_bytes``; one byte more fails the call and
  drops the connection. Compressed bodies are not accepted (``Accept-Encoding: identity``),
  so the cap counts the bytes that are kept, not a compressed stand-in for them.
- **Time.** ``timeout`` is one deadline for the whole call (lookup, connect, TLS, send, every
  read), so a server that trickles one byte at a time is cut off at the deadline.
- **Sending again.** A request that may have reached the server (written, no answer) is sent
  again only when its method is idempotent or it carries an ``Idempotency-Key`` (http11.py).
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import ipaddress
import json
import logging
import socket
from dataclasses import dataclass
from typing import Any

import httpx  # its URL parser only
from django.conf import settings
from django.core.checks import Error, register

from executions.destinations import http11, throttling

log = logging.getLogger(__name__)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_MAX_BYTES = 10 * 1024 * 1024


class OutboundError(Exception):
    """A call that was stopped on our side; ``retryable`` says whether trying again may help."""

    retryable = True


class AddressRefused(OutboundError):
    """The destination's host resolves only to addresses that may not be reached."""

    retryable = False


class ResponseTooLarge(OutboundError):
    """The response body is bigger than the destination's ``max_response_bytes``."""


class DeadlineExceeded(OutboundError):
    """The call did not finish within its timeout."""


class UnsupportedEncoding(OutboundError):
    """The server compressed the body although we asked it not to."""

    retryable = False


class TransportError(OutboundError):
    """The exchange failed on the network (no lookup, no connection, a reset, a malformed answer)."""


class InvalidRequest(OutboundError):
    """The request cannot be sent as given (a header value with a line break, a bad URL)."""

    retryable = False


# --- which addresses may be reached --------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """What ``SB_OUTBOUND_ALLOW`` opens beyond public addresses."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Policy:
        """``"127.0.0.0/8,::1,api.internal"`` → a policy; raises ValueError naming a bad entry."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in (part.strip() for part in text.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _is_host_name(entry):
                raise ValueError(f"SB_OUTBOUND_ALLOW: {entry!r} is neither a CIDR, an IP address nor a host name")
            hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, host: str, address: Address) -> bool:
        if host.lower().rstrip(".") in self.hosts:
            return True
        candidates = {address, _embedded_ipv4(address) or address}
        if any(candidate in network for candidate in candidates for network in self.networks):
            return True
        return refusal_reason(address) is None


def _is_host_name(text: str) -> bool:
    labels = text.rstrip(".").split(".")
    return 0 < len(text) <= 253 and all(
        0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
        and not label.startswith("-") and not label.endswith("-") for label in labels)


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or 6to4 (2002::/16) address carries."""
    if isinstance(address, ipaddress.IPv6Address):
        return address.ipv4_mapped or address.sixtofour
    return None


def refusal_reason(address: Address) -> str | None:
    """Why ``address`` is not a public unicast address (None when it is)."""
    address = _embedded_ipv4(address) or address
    for reason, flag in (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
                         ("link-local", address.is_link_local), ("multicast", address.is_multicast)):
        if flag:
            return reason
    if address.is_private:
        return "private"
    if not address.is_global or address.is_reserved:
        return "non-public"
    return None


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Policy:
    try:
        return Policy.parse(text)
    except ValueError as error:
        # Fail closed: a typo must not open anything (the system check below names it).
        log.error("%s; outbound calls reach public addresses only until it is fixed", error)
        return Policy()


def policy() -> Policy:
    """The policy configured by ``SB_OUTBOUND_ALLOW`` (settings.SB["OUTBOUND_ALLOW"])."""
    return _parsed(settings.SB.get("OUTBOUND_ALLOW", ""))


@register()
def outbound_allow_is_valid(app_configs: Any, **kwargs: Any) -> list[Error]:
    """``manage.py check`` refuses an SB_OUTBOUND_ALLOW entry that is not a CIDR or host name."""
    try:
        Policy.parse(settings.SB.get("OUTBOUND_ALLOW", ""))
    except ValueError as error:
        return [Error(str(error), hint="Comma-separated CIDRs and host names, e.g. 127.0.0.0/8,::1",
                      id="schemabridge.E020")]
    return []


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _from_infos(host: str, infos: list[Any]) -> list[Address]:
    # getaddrinfo may add a scope to link-local IPv6 ("fe80::1%eth0"); the address is the part before it.
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise TransportError(f"cannot resolve {host}: no addresses")
    return addresses


async def resolve_async(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (an IP literal resolves to itself); the lookup runs
    in the event loop's resolver thread. Raises TransportError when there is none."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise TransportError(f"cannot resolve {host}: {error.strerror}") from error
    return _from_infos(host, list(infos))


async def allowed_addresses_async(host: str, port: int) -> list[Address]:
    """The addresses ``host`` resolves to that the policy allows, in resolver order. Raises
    AddressRefused (naming the first refused address and why) when there is none."""
    return _allowed(host, await resolve_async(host, port))


def _allowed(host: str, addresses: list[Address]) -> list[Address]:
    if not addresses:
        raise TransportError(f"cannot resolve {host}: no addresses")
    rules = policy()
    allowed = [address for address in addresses if rules.allows(host, address)]
    if allowed:
        return allowed
    first = addresses[0]
    raise AddressRefused(f"{host} resolves to {first}, a {refusal_reason(first) or 'refused'} address; "
                         f"outbound calls reach public addresses only unless SB_OUTBOUND_ALLOW opens it")


def check_literal_host(host: str) -> str | None:
    """Why a URL whose host is an IP literal can never be called (None when it can, or when
    the host is a name: names are checked when they are resolved, at call time)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if policy().allows(host, address):
        return None
    return f"{address} is a {refusal_reason(address)} address (outbound calls reach public addresses only " \
           f"unless SB_OUTBOUND_ALLOW opens it)"


# --- the same contracts on an event loop (http11.py carries the bytes) ----------------------------

async def close_async_clients() -> None:
    """Close this loop's idle keep-alive connections; call before the loop ends."""
    await http11.close_all()


# --- one call ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fetched:
    status: int
    content: bytes
    content_type: str
    # Of a 429 or 5xx answer only: the headers that say how long to wait (throttling.SENT).
    waits: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str:
        """A header of ``waits`` (lower-case name), or ''."""
        return next((value for key, value in self.waits if key == name), "")

    def body(self) -> Any:
        """The body as JSON when it is JSON, else as text; None when empty."""
        if not self.content:
            return None
        try:
            return json.loads(self.content)
        except ValueError:
            return self.content.decode(_charset(self.content_type), errors="replace")

    def text(self, max_bytes: int) -> str:
        """The first ``max_bytes`` of the body as text, in its charset (for error excerpts)."""
        return self.content[:max_bytes].decode(_charset(self.content_type), errors="replace")

    def excerpt(self, limit: int = 120) -> str:
        """The start of the body on one line, for error messages."""
        text = self.content[:limit * 4].decode(_charset(self.content_type), errors="replace")
        text = " ".join(text.split())
        return text if len(text) <= limit else text[:limit - 1] + "…"


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            try:
                return codecs.lookup(value.strip('"')).name
            except LookupError:
                break
    return "utf-8"


def fetch(method: str, url: str, *, json_body: Any = None, headers: dict[str, str] | None = None,
          timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> Fetched:
    """``fetch_async`` for a thread without an event loop (an inline drain, a tool, a test):
    the same transport, on an event loop of its own for this one call. Raises OutboundError
    subclasses."""
    async def once() -> Fetched:
        try:
            return await fetch_async(method, url, json_body=json_body, headers=headers, timeout=timeout,
                                     max_bytes=max_bytes)
        finally:
            await close_async_clients()
    return asyncio.run(once())


async def fetch_async(method: str, url: str, *, json_body: Any = None, headers: dict[str, str] | None = None,
                      timeout: float, max_bytes: int = DEFAULT_MAX_BYTES, pool: Any = None) -> Fetched:
    """One call on the running event loop under the contracts above (checked and pinned
    addresses, no redirects, no proxies, the byte cap, one deadline), through ``http11``'s
    keep-alive connections: the one transport of every outbound call (``fetch`` included).
    ``pool`` names the pool to use (the drain passes the destination's id). Raises
    OutboundError subclasses, TransportError included."""
    target = _target(url)
    body = http11.json_bytes(json_body) if json_body is not None else b""
    given = headers or {}
    sent = [*_defaults(target.host_header, frozenset(name.lower() for name in given), json_body is not None),
            *((name, value) for name, value in given.items() if name.lower() not in _FRAMING),
            ("Accept-Encoding", "identity"), ("Content-Length", str(len(body)))]

    async def connect() -> http11.Connection:
        addresses = await allowed_addresses_async(target.host, target.port)
        return await http11.connect_to(addresses, target.port, tls_name=target.host if target.tls else None)

    try:
        # One deadline for the whole call: resolving, connecting, TLS, sending, every read.
        async with asyncio.timeout(timeout):
            answer = await http11.exchange(
                (pool, target.origin), connect, method, target.path, sent, body,
                max_bytes=max_bytes, too_large=ResponseTooLarge)
    except TimeoutError as error:
        raise DeadlineExceeded(f"timed out after {timeout:g}s") from error
    except http11.TransportError as error:
        raise TransportError(str(error)) from error
    except http11.RequestRefused as error:
        raise InvalidRequest(str(error)) from error
    encoding = answer.header(b"content-encoding").strip().lower()
    if encoding not in ("", "identity"):
        raise UnsupportedEncoding(f"the response is compressed ({encoding}) although "
                                  f"'Accept-Encoding: identity' was asked for")
    waits = () if answer.status != 429 and answer.status < 500 else tuple(
        (key.decode("latin-1"), value.decode("latin-1")) for key, value in answer.headers
        if key.decode("latin-1") in throttling.SENT)
    return Fetched(answer.status, answer.content, answer.header(b"content-type"), waits)


# The framing and the encoding are ours: a caller's headers of these names are dropped.
_FRAMING = frozenset({"accept-encoding", "content-length"})


@functools.lru_cache(maxsize=1024)
def _defaults(host_header: str, replaced: frozenset[str], json: bool) -> tuple[tuple[str, str], ...]:
    """The default headers that the caller's (named ``replaced``, in lower case) do not
    replace; worked out once per host and set of names, not for every call."""
    defaults = [("Host", host_header), ("User-Agent", http11.USER_AGENT), ("Accept", "*/*")]
    if json:
        defaults.append(("Content-Type", "application/json"))
    return tuple((name, value) for name, value in defaults if name.lower() not in replaced)


@dataclass(frozen=True)
class _Target:
    tls: bool
    host: str
    port: int
    path: bytes
    origin: tuple[str, str, int]

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"


@functools.lru_cache(maxsize=4096)
def _target(url: str) -> _Target:
    """Where ``url`` points, parsed (and percent-encoded) as httpx parses it; only http and https."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise InvalidRequest(f"not a valid URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise AddressRefused(f"outbound calls use http:// or https:// URLs with a host, not {parsed.scheme}://")
    tls = parsed.scheme == "https"
    port = parsed.port or (443 if tls else 80)
    host = parsed.raw_host.decode("ascii")
    return _Target(tls, host, port, parsed.raw_path, (parsed.scheme, host, port))


