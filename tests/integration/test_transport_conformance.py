"""The outbound transport against a deliberately awkward loopback server (issue 27 §4): what a
server may legally (or illegally) do, and what ``outbound.fetch_async`` must make of it.

The suite ran against both transports (executions/destinations/http11.py and an aiohttp one) while both
existed; http11 stayed (docs/performance.md, "HTTP transport: aiohttp vs http11"). Every
case goes through the public seam (``outbound.fetch_async``); the server
(tests/support/awkward_server.py) counts connections and the requests it read, so "was this
request sent again?" is answered by the server, not by the client's word.

The rule on sending again (RFC 9112 §9.3.1): a request that may have reached the server —
it was written, and no answer came — is sent again only when its method is idempotent or it
carries the step's ``Idempotency-Key``. A POST without one is sent once, whatever happened to
its connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from executions.destinations import http11, outbound
from tests.support.awkward_server import AwkwardServer, Connection, answer, keep_alive
from tests.support.outbound import run_calls


@pytest.fixture(autouse=True)
def allow_loopback(settings) -> None:
    settings.SB = {**settings.SB, "OUTBOUND_ALLOW": "127.0.0.0/8"}




async def call(server: AwkwardServer, method: str = "GET", path: str = "/x", **kwargs: Any) -> outbound.Fetched:
    kwargs.setdefault("timeout", 5.0)
    return await outbound.fetch_async(method, f"{server.url}{path}", pool="conformance", **kwargs)


async def outcome(server: AwkwardServer, method: str, **kwargs: Any) -> tuple[str, int]:
    """``(status or the error's name, requests the server has read)`` after one call."""
    try:
        result = str((await call(server, method, **kwargs)).status)
    except outbound.OutboundError as error:
        result = type(error).__name__
    return result, len(server.requests)


# --- keep-alive and framing --------------------------------------------------------------------

def test_calls_reuse_one_kept_alive_connection():
    async def scenario() -> tuple[list[Any], int, bytes]:
        async with AwkwardServer(keep_alive) as server:
            bodies = [(await call(server, "POST", json_body={"i": i})).body() for i in range(5)]
            return bodies, server.connections, server.requests[0]
    bodies, connections, first = run_calls(scenario())
    assert bodies == [{"n": n} for n in range(1, 6)]
    assert connections == 1
    text = first.decode()
    assert text.startswith("POST /x HTTP/1.1\r\n") and text.endswith('{"i":0}')
    lowered = text.lower()
    assert "content-type: application/json" in lowered and "accept-encoding: identity" in lowered


def test_a_chunked_body_with_trailer_fields_is_read_and_the_connection_kept():
    async def chunked(conn: Connection) -> None:
        while True:
            await conn.request()
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                            b"Trailer: X-Checksum\r\n\r\n"
                            b"5\r\n{\"a\":\r\n3;ext=1\r\n [1\r\n2\r\n]}\r\n0\r\nX-Checksum: abc\r\n\r\n")

    async def scenario() -> tuple[list[Any], int]:
        async with AwkwardServer(chunked) as server:
            bodies = [(await call(server)).body() for _ in range(2)]
            return bodies, server.connections
    assert run_calls(scenario()) == ([{"a": [1]}, {"a": [1]}], 1)


@pytest.mark.parametrize("interim", [b"HTTP/1.1 100 Continue\r\n\r\n",
                                     b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n"
                                     b"Content-Type: text/css\r\n\r\n",
                                     b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"],
                         ids=["100", "103", "100-then-103"])
def test_informational_answers_before_the_final_one_are_skipped(interim):
    async def informational(conn: Connection) -> None:
        await conn.request()
        await conn.send(interim)
        await conn.send(answer(b'{"final": true}', status="201 Created"))

    async def scenario() -> outbound.Fetched:
        async with AwkwardServer(informational) as server:
            return await call(server, "POST", json_body={})
    fetched = run_calls(scenario())
    assert (fetched.status, fetched.body(), fetched.content_type) == (201, {"final": True}, "application/json")


def test_a_body_that_runs_to_the_end_of_the_connection_is_read():
    async def until_close(conn: Connection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"to\":")
        await conn.send(b" \"eof\"}")  # no length, not chunked: the close ends the body

    async def scenario() -> tuple[Any, Any, int]:
        async with AwkwardServer(until_close) as server:
            first = (await call(server)).body()
            second = (await call(server)).body()
            return first, second, server.connections
    assert run_calls(scenario()) == ({"to": "eof"}, {"to": "eof"}, 2), "a connection read to its end is never reused"


def test_connection_close_in_the_middle_of_a_pool_is_honoured():
    async def close_on_second(conn: Connection) -> None:
        served = 0
        while True:
            await conn.request()
            served += 1
            if served == 2:
                await conn.send(answer(headers=b"Connection: close\r\n"))
                return  # and the server closes the connection
            await conn.send(answer())

    async def scenario() -> tuple[list[int], int, int]:
        async with AwkwardServer(close_on_second) as server:
            statuses = [(await call(server)).status for _ in range(4)]
            return statuses, server.connections, len(server.requests)
    assert run_calls(scenario()) == ([200, 200, 200, 200], 2, 4), \
        "each request went out once; the closed one was not reused"


def test_concurrent_calls_each_get_a_connection_and_all_are_kept():
    async def scenario() -> tuple[int, int]:
        async with AwkwardServer(keep_alive) as server:
            await asyncio.gather(*(call(server) for _ in range(8)))
            first = server.connections
            await asyncio.gather(*(call(server) for _ in range(8)))
            return first, server.connections
    assert run_calls(scenario()) == (8, 8), "the second round reuses the eight idle connections"


def test_a_connection_the_server_closed_while_idle_is_replaced():
    async def one_then_close(conn: Connection) -> None:
        await conn.request()
        await conn.send(answer())  # says nothing of closing: the client keeps the connection
        # and then closes it, as a server's idle timeout does

    async def scenario() -> tuple[int, int, int]:
        async with AwkwardServer(one_then_close) as server:
            await call(server, "POST", json_body=1)
            await asyncio.sleep(0.05)  # the close arrives while the connection is idle
            status = (await call(server, "POST", json_body=2)).status
            return status, server.connections, len(server.requests)
    assert run_calls(scenario()) == (200, 2, 2)


@pytest.mark.parametrize("noticed", [True, False], ids=["close-seen-while-idle", "close-seen-on-send"])
def test_a_keyed_post_that_meets_a_connection_closed_while_idle_is_sent_once_on_a_new_one(monkeypatch, noticed):
    """A POST carrying an Idempotency-Key (as every HTTP step's does) that meets a stale
    connection is sent on a new one — also when the close races the reuse and is found only
    when the request meets it."""
    if not noticed:
        monkeypatch.setattr(http11.Connection, "usable", lambda self, now: True)

    async def one_then_close(conn: Connection) -> None:
        await conn.request()
        await conn.send(answer())

    async def scenario() -> tuple[int, int, int]:
        async with AwkwardServer(one_then_close) as server:
            key = {"Idempotency-Key": "sb:step-1"}
            await call(server, "POST", json_body=1, headers=key)
            await asyncio.sleep(0.05)  # the close arrives while the connection is idle
            status = (await call(server, "POST", json_body=2, headers=key)).status
            return status, server.connections, len(server.requests)
    assert run_calls(scenario()) == (200, 2, 2)


@pytest.mark.parametrize("tail", [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b""],
                         ids=["bytes-after-the-answer", "connection-close"])
def test_a_connection_is_reused_only_after_a_clean_keep_alive_answer(tail):
    async def answer_then(conn: Connection) -> None:
        while True:
            await conn.request()
            await conn.send(answer(headers=b"" if tail else b"Connection: close\r\n") + tail)

    async def scenario() -> tuple[int, int]:
        async with AwkwardServer(answer_then) as server:
            for _ in range(2):
                await call(server)
            return server.connections, len(server.requests)
    assert run_calls(scenario()) == (2, 2), "each call opened a connection of its own"


def test_the_host_header_names_the_host_and_port_and_the_callers_headers_win():
    async def scenario() -> str:
        async with AwkwardServer(keep_alive) as server:
            await call(server, "GET", "/p%20q?x=1", headers={"user-agent": "mine", "Accept": "text/plain"})
            return server.requests[0].decode()
    request = run_calls(scenario())
    lines = request.split("\r\n")
    assert lines[0] == "GET /p%20q?x=1 HTTP/1.1"
    fields = [line.lower() for line in lines[1:]]
    port = next(line for line in fields if line.startswith("host: 127.0.0.1:")).rsplit(":", 1)[1]
    assert port.isdigit()
    assert "user-agent: mine" in fields and "accept: text/plain" in fields
    assert sum(line.startswith(("user-agent:", "accept:")) for line in fields) == 2, "no second default"


def test_a_refused_connection_is_a_retryable_transport_error():
    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        await outbound.fetch_async("GET", f"http://127.0.0.1:{port}/x", timeout=5)
    with pytest.raises(outbound.TransportError, match=r"ConnectionRefusedError|Connect call failed") as error:
        run_calls(scenario())
    assert error.value.retryable is True


# --- a server that reads the request and closes without answering --------------------------------

async def read_then_close(conn: Connection) -> None:
    await conn.request()


async def answer_once_then_read_and_close(conn: Connection) -> None:
    """Answers a connection's first request (keep-alive), reads its second and closes: the
    server may have acted on that second request (RFC 9112 §9.3.1)."""
    await conn.request()
    await conn.send(answer())
    await conn.request()


def test_a_post_on_a_fresh_connection_that_got_no_answer_is_not_sent_again():
    async def scenario() -> tuple[str, int]:
        async with AwkwardServer(read_then_close) as server:
            return await outcome(server, "POST", json_body={"charge": 1})
    assert run_calls(scenario()) == ("TransportError", 1)


def test_a_post_on_a_reused_connection_that_got_no_answer_is_not_sent_again():
    """The server read the POST and may have acted on it: sending it again could act twice."""
    async def scenario() -> tuple[str, tuple[str, int], list[str]]:
        async with AwkwardServer(answer_once_then_read_and_close) as server:
            first = str((await call(server, "POST", json_body={"charge": 1})).status)
            second = await outcome(server, "POST", json_body={"charge": 2})
            return first, second, server.methods()
    first, second, methods = run_calls(scenario())
    assert first == "200"
    assert second == ("TransportError", 2), "the second POST reached the server once and failed the call"
    assert methods == ["POST", "POST"]


def test_a_post_whose_answer_broke_off_is_not_sent_again():
    async def half_answer(conn: Connection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")

    async def scenario() -> tuple[str, int]:
        async with AwkwardServer(half_answer) as server:
            return await outcome(server, "POST", json_body=1)
    assert run_calls(scenario()) == ("TransportError", 1)


@pytest.mark.parametrize(("method", "headers"), [("GET", {}), ("PUT", {}), ("DELETE", {}),
                                                 ("POST", {"Idempotency-Key": "sb:step-1"})],
                         ids=["GET", "PUT", "DELETE", "POST-with-Idempotency-Key"])
def test_an_idempotent_or_keyed_request_may_be_sent_once_more(method, headers):
    async def scenario() -> tuple[str, int]:
        async with AwkwardServer(answer_once_then_read_and_close) as server:
            await call(server, method, headers=headers)
            return await outcome(server, method, headers=headers)
    # Either it was sent again on a fresh connection (answered there), or the call failed;
    # never more than once again.
    assert run_calls(scenario()) in {("200", 3), ("TransportError", 2)}


# --- heads the client must refuse ---------------------------------------------------------------

def _flood(start: bytes, pieces: list[bytes], end: bytes = b"") -> Any:
    async def flood(conn: Connection) -> None:
        await conn.request()
        await conn.send(start)
        for piece in pieces:
            await conn.send(piece)
        await conn.send(end)
        await asyncio.sleep(10)  # never anything more: a client waiting for it meets its deadline
    return flood


OVERSIZED_FIELD = _flood(b"HTTP/1.1 200 OK\r\nX-Long: ", [b"v" * 1024] * 200, b"\r\nContent-Length: 0\r\n\r\n")
ENDLESS_FIELDS = _flood(b"HTTP/1.1 200 OK\r\n", [b"X-Field-%d: %s\r\n" % (n, b"v" * 90) for n in range(2000)])
ENDLESS_LINE = _flood(b"HTTP/1.1 200 ", [b"O" * 1024] * 200)
TRAILER_FLOOD = _flood(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n",
                       [b"X-Trailer-%d: %s\r\n" % (n, b"t" * 90) for n in range(2000)])


@pytest.mark.parametrize("scenario_", [OVERSIZED_FIELD, ENDLESS_FIELDS, ENDLESS_LINE, TRAILER_FLOOD],
                         ids=["oversized-field", "endless-fields", "endless-status-line", "trailer-flood"])
def test_an_oversized_head_fails_the_call_as_a_transport_error(scenario_):
    async def scenario() -> None:
        async with AwkwardServer(scenario_) as server:
            await call(server, timeout=8)
    with pytest.raises(outbound.TransportError):
        run_calls(scenario())


@pytest.mark.parametrize("head", [b"HTTP/1.1 OK 200\r\nContent-Length: 2\r\n\r\n{}",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                                  b"HTTP/1.1 200 OK\r\nBad Header: 1\r\nContent-Length: 0\r\n\r\n",
                                  b"SMTP ready\r\n\r\n"],
                         ids=["status-line", "length-not-a-number", "two-lengths", "space-in-name", "not-http"])
def test_a_malformed_head_fails_the_call_as_a_transport_error(head):
    async def malformed(conn: Connection) -> None:
        await conn.request()
        await conn.send(head)

    async def scenario() -> None:
        async with AwkwardServer(malformed) as server:
            await call(server)
    with pytest.raises(outbound.TransportError):
        run_calls(scenario())


# --- time and size ------------------------------------------------------------------------------

def test_a_slow_drip_body_is_cut_off_at_the_deadline():
    async def drip(conn: Connection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(100000):  # a byte every 20 ms: each read succeeds, the whole takes half an hour
            await conn.send(b"x")
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        async with AwkwardServer(drip) as server:
            await call(server, timeout=0.5)
    with pytest.raises(outbound.DeadlineExceeded, match=r"timed out after 0\.5s"):
        run_calls(scenario())


def test_a_slow_drip_head_is_cut_off_at_the_deadline():
    async def drip(conn: Connection) -> None:
        await conn.request()
        for byte in b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 1000:
            await conn.send(bytes([byte]))
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        async with AwkwardServer(drip) as server:
            await call(server, timeout=0.5)
    with pytest.raises(outbound.DeadlineExceeded):
        run_calls(scenario())


@pytest.mark.parametrize("framing", ["sized", "chunked", "to-eof"])
def test_a_body_over_the_cap_fails_and_the_next_call_gets_its_own_answer(framing):
    """One byte over the cap fails the call; the rest of that body never reaches the next
    call (its connection is closed, or, when the whole answer had already arrived, cleanly
    at its end)."""
    async def big(conn: Connection) -> None:
        while True:
            await conn.request()
            if len(conn.server.requests) > 1:
                await conn.send(answer(b'{"second": true}'))
                continue
            size = 50_000
            if framing == "sized":
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size)
            elif framing == "chunked":
                await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in range(50):
                    await conn.send(b"3e8\r\n" + b"x" * 1000 + b"\r\n")
                await conn.send(b"0\r\n\r\n")
            else:
                await conn.send(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * size)
                return

    async def scenario() -> Any:
        async with AwkwardServer(big) as server:
            with pytest.raises(outbound.ResponseTooLarge, match=r"the limit is 10,000|exceeded 10,000 bytes"):
                await call(server, max_bytes=10_000)
            return (await call(server)).body()
    assert run_calls(scenario()) == {"second": True}


def test_a_body_at_the_cap_is_read_whole():
    async def exact(conn: Connection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"3e8\r\n" + b"x" * 1000 + b"\r\n0\r\n\r\n")

    async def scenario() -> int:
        async with AwkwardServer(exact) as server:
            return len((await call(server, max_bytes=1000)).content)
    assert run_calls(scenario()) == 1000


@pytest.mark.parametrize("encoding", [b"gzip", b"br", b"deflate"])
def test_a_compressed_answer_is_refused(encoding):
    async def compressed(conn: Connection) -> None:
        await conn.request()
        await conn.send(answer(b"\x1f\x8b not really", headers=b"Content-Encoding: " + encoding + b"\r\n"))

    async def scenario() -> bytes:
        async with AwkwardServer(compressed) as server:
            with pytest.raises(outbound.UnsupportedEncoding, match=encoding.decode()):
                await call(server)
            return server.requests[0]
    assert b"accept-encoding: identity" in run_calls(scenario()).lower()


def test_a_redirect_is_the_answer_and_is_not_followed():
    async def redirect(conn: Connection) -> None:
        await conn.request()
        await conn.send(answer(b"", status="307 Temporary Redirect",
                               headers=b"Location: http://169.254.169.254/latest/meta-data/\r\n"))

    async def scenario() -> tuple[int, int, int]:
        async with AwkwardServer(redirect) as server:
            status = (await call(server, "POST", json_body={})).status
            return status, len(server.requests), server.connections
    assert run_calls(scenario()) == (307, 1, 1)


# --- requests the client must not send ----------------------------------------------------------

@pytest.mark.parametrize(("name", "value"), [("X-A", "1\r\nX-Injected: 2"), ("X-A", "line\nbreak"),
                                             ("X-A", "cr\ronly"), ("X-A", "nul\x00"), ("X-A", "del\x7f"),
                                             ("X-A", " leading"), ("X-A", "trailing "), ("X A", "1"),
                                             ("X:A", "1"), ("X-A\r\nX-B", "1")])
def test_a_header_that_cannot_be_framed_is_refused_before_sending(name, value):
    async def scenario() -> int:
        async with AwkwardServer(keep_alive) as server:
            with pytest.raises(outbound.InvalidRequest, match=r"not valid HTTP/1\.1"):
                await call(server, headers={name: value})
            return len(server.requests)
    assert run_calls(scenario()) == 0


def test_a_method_that_is_not_a_token_is_refused_before_sending():
    async def scenario() -> int:
        async with AwkwardServer(keep_alive) as server:
            with pytest.raises(outbound.InvalidRequest, match=r"not valid HTTP/1\.1"):
                await call(server, "GET /y HTTP/1.1\r\nX:")
            return len(server.requests)
    assert run_calls(scenario()) == 0


def test_cookies_are_neither_kept_nor_sent_back():
    async def set_cookie(conn: Connection) -> None:
        while True:
            await conn.request()
            await conn.send(answer(headers=b"Set-Cookie: session=abc; Path=/\r\n"))

    async def scenario() -> list[bytes]:
        async with AwkwardServer(set_cookie) as server:
            await call(server)
            await call(server)
            return server.requests
    assert all(b"cookie" not in request.lower() for request in run_calls(scenario()))
