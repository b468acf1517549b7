"""Spies for the outbound transport's tests: where its sockets connect, and with which TLS name."""

from __future__ import annotations

import asyncio.selector_events
from collections.abc import Awaitable
from typing import Any

LOOPBACK = ("127.", "::1")


def spy_on_connects(monkeypatch: Any) -> list[str]:
    """Every address an event loop connects a socket to (the transport's connector connects
    each socket with ``loop.sock_connect``), in order; a non-loopback address is refused
    before any packet is sent, so a test that failed would fail on our side of the wire."""
    seen: list[str] = []
    real = asyncio.selector_events.BaseSelectorEventLoop.sock_connect

    async def spy(loop: Any, sock: Any, address: Any) -> None:
        host = str(address[0])
        seen.append(host)
        if not host.startswith(LOOPBACK):
            raise AssertionError(f"a test tried to connect to {host}")
        await real(loop, sock, address)

    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", spy)
    return seen


def spy_on_tls_names(monkeypatch: Any) -> list[str | None]:
    """The name each TLS connection is verified against (``server_hostname``)."""
    names: list[str | None] = []
    real = asyncio.BaseEventLoop.create_connection

    async def spy(loop: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl"):
            names.append(kwargs.get("server_hostname"))
        return await real(loop, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_connection", spy)
    return names


def run_calls(coroutine: Awaitable[Any]) -> Any:
    """Run ``coroutine`` (outbound calls) on a fresh event loop, closing its connection pools after."""
    from executions.destinations import outbound

    async def main() -> Any:
        try:
            return await coroutine
        finally:
            await outbound.close_async_clients()
    return asyncio.run(main())
