"""The outbound HTTP contracts on the event loop (``outbound.fetch_async``, used by HTTP steps
in a drain): the same checks as the blocking client, observed on loopback test servers.

Refusals of other addresses are proven without sending a packet: the resolver is patched and
the event loop's ``sock_connect`` — where the transport's connector connects a socket — is
spied on (and refuses anything but loopback)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from executions import destinations, outbound
from executions.models import Destination, DestinationCall, Step
from tests.support import helpers
from tests.support.httpserver import serve
from tests.support.outbound import spy_on_connects

LOOPBACK = ("127.", "::1")


@pytest.fixture
def connects(monkeypatch) -> list[str]:
    """Every address the transport connects to; a non-loopback one is refused before connecting."""
    return spy_on_connects(monkeypatch)


@pytest.fixture
def resolves(monkeypatch) -> dict[str, list[str]]:
    """Host names the (patched) resolver knows."""
    table: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in table:
            return real(host, port, *args, **kwargs)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in table[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return table


@pytest.fixture
def allow(settings):
    def set_allow(text: str) -> None:
        settings.SB = {**settings.SB, "OUTBOUND_ALLOW": text}
    return set_allow


def fetch(url: str, **kwargs: Any) -> outbound.Fetched:
    """One async call on a fresh loop (so a fresh pool: every call connects)."""
    async def one() -> outbound.Fetched:
        try:
            return await outbound.fetch_async(kwargs.pop("method", "GET"), url, timeout=kwargs.pop("timeout", 5.0),
                                              **kwargs)
        finally:
            await outbound.close_async_clients()
    return asyncio.run(one())


def test_loopback_outside_the_allow_list_is_refused_before_connecting(allow, connects):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        assert fetch(f"{url}/ok").status == 200
        port = url.rsplit(":", 1)[1]
        with pytest.raises(outbound.AddressRefused, match=r"127\.0\.0\.2 .* loopback"):
            fetch(f"http://127.0.0.2:{port}/ok")
    assert connects == ["127.0.0.1"]
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(("address", "reason"), [
    ("169.254.169.254", "link-local"), ("10.0.0.1", "private"), ("::ffff:10.0.0.1", "private"),
])
def test_a_name_resolving_to_a_refused_address_is_refused_before_any_socket_opens(
        allow, connects, resolves, address, reason):
    allow("127.0.0.0/8,::1")
    resolves["metadata.test"] = [address]
    with pytest.raises(outbound.AddressRefused, match=f"metadata.test resolves to .*, a {reason} address"):
        fetch("http://metadata.test/latest/meta-data/")
    assert connects == []


def test_the_connection_goes_to_a_checked_address_in_turn_with_the_name_as_host(allow, connects, resolves):
    allow("127.0.0.0/8,::1")
    with serve() as (url, recorder):
        port = url.rsplit(":", 1)[1]
        resolves["both.test"] = ["10.0.0.1", "::1", "127.0.0.1"]
        assert fetch(f"http://both.test:{port}/ok").status == 200
    assert connects == ["::1", "127.0.0.1"]  # 10.0.0.1 was never tried
    assert recorder.requests[0]["headers"]["Host"] == f"both.test:{port}"


def test_redirects_are_answers_never_followed(allow, connects):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        assert fetch(f"{url}/redirect?to=http://169.254.169.254/latest").status == 302
    assert len(recorder.requests) == 1 and connects == ["127.0.0.1"]


def test_proxies_from_the_environment_are_ignored(allow, connects, monkeypatch):
    allow("127.0.0.1/32")
    monkeypatch.setenv("HTTP_PROXY", "http://10.0.0.1:3128")
    monkeypatch.setenv("ALL_PROXY", "http://10.0.0.1:3128")
    with serve() as (url, _):
        assert fetch(f"{url}/ok").status == 200
    assert connects == ["127.0.0.1"]


@pytest.mark.parametrize("shape", ["sized", "unsized"])
def test_a_response_over_the_cap_fails_the_call(allow, shape):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        with pytest.raises(outbound.ResponseTooLarge, match="1,000"):
            fetch(f"{url}/big/50000/{shape}", max_bytes=1000)
        assert len(fetch(f"{url}/big/1000/{shape}", max_bytes=1000).content) == 1000


def test_a_trickling_server_is_cut_off_at_the_deadline(allow):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        started = time.monotonic()
        with pytest.raises(outbound.DeadlineExceeded, match=r"timed out after 0\.5s"):
            fetch(f"{url}/trickle/30", timeout=0.5)
        assert time.monotonic() - started < 1.5


def test_a_compressed_body_is_refused(allow):
    allow("127.0.0.1/32")
    with serve() as (url, recorder), pytest.raises(outbound.UnsupportedEncoding, match="gzip"):
        fetch(f"{url}/gzip")
    assert recorder.requests[0]["headers"]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("url", ["unix:///tmp/x.sock", "file:///etc/passwd", "http:///no-host"])
def test_only_http_urls_with_a_host_are_called(connects, url):
    with pytest.raises(outbound.AddressRefused, match="http:// or https://"):
        fetch(url)
    assert connects == []


# --- HTTP steps on a drain's event loop ---------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_http_steps_on_the_loop_keep_their_outcomes_call_log_and_redaction(workspace):
    with serve() as (url, recorder):
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5,
                                         concurrency_limit=10)
        destinations.update_destination(api, credentials={"bearer": "s3cret-token-value"})
        helpers.publish(workspace, "ok", helpers.http_doc("api", "/ok"))
        helpers.publish(workspace, "bad", helpers.http_doc("api", "/echo-headers/400"))
        helpers.publish(workspace, "slow", {"start": "call", "vertices": {"call": {
            "type": "HTTP", "destination": "api", "path": "/slow/5", "timeoutSeconds": 1,
            "retry": {"maxAttempts": 1}}}})
        ok = helpers.start(workspace, "ok", {})
        bad = helpers.start(workspace, "bad", {})
        slow = helpers.start(workspace, "slow", {})
        helpers.drain_in_thread()
    assert helpers.refresh(ok).status == "SUCCEEDED"
    assert helpers.step(ok, "call").attempt == 1
    assert recorder.requests[0]["headers"]["Authorization"] == "Bearer s3cret-token-value"
    assert all(r["headers"]["Idempotency-Key"].startswith("sb:") for r in recorder.requests)
    failed = helpers.step(bad, "call")
    assert helpers.refresh(bad).status == "FAILED" and "HTTP 400" in failed.error
    assert "s3cret-token-value" not in failed.error, "credentials are redacted from step errors"
    timed_out = helpers.step(slow, "call")
    assert helpers.refresh(slow).status == "FAILED"
    assert "timed out" in timed_out.error
    calls = DestinationCall.objects.filter(destination=api)
    assert calls.filter(status_code=200).count() == 1 and calls.filter(status_code=400).count() == 1
    assert all("s3cret-token-value" not in c.error for c in calls)
    assert not Step.objects.filter(destination=api, status="RUNNING").exists(), "every slot is released"
