"""Outbound HTTP safety (issue 15, findings 2-4), observed on loopback test servers.

``outbound.fetch`` is the blocking face of the one transport (``fetch_async`` on an event loop
of its own for the call); tests/integration/test_outbound_async.py calls it on a loop.

Refusals of other addresses are proven without sending a packet: the resolver is patched and
the event loop's ``sock_connect`` is spied on (and refuses anything but loopback), so a test
that failed would fail on our side of the wire."""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from typing import Any

import pytest

from executions.destinations import outbound
from executions.models import Destination, DestinationCall
from tests.support import helpers
from tests.support.httpserver import serve
from tests.support.outbound import spy_on_connects, spy_on_tls_names


@pytest.fixture
def connects(monkeypatch) -> list[str]:
    """Every address a socket is connected to; a non-loopback one is refused before connecting."""
    return spy_on_connects(monkeypatch)


@pytest.fixture
def resolves(monkeypatch) -> dict[str, list[str]]:
    """Host names the (patched) resolver knows; every lookup is counted in ``lookups``."""
    table: dict[str, list[str]] = {}
    lookups: list[str] = []
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in table:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in table[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    table["_lookups"] = lookups
    return table


@pytest.fixture
def allow(settings):
    def set_allow(text: str) -> None:
        settings.SB = {**settings.SB, "OUTBOUND_ALLOW": text}
    return set_allow


def fetch(url: str, **kwargs: Any) -> outbound.Fetched:
    return outbound.fetch("GET", url, timeout=kwargs.pop("timeout", 5.0), **kwargs)


# --- addresses (finding 2) ---------------------------------------------------------------------

def test_loopback_outside_the_allow_list_is_refused_before_connecting(allow, connects):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        assert fetch(f"{url}/ok").status == 200
        port = url.rsplit(":", 1)[1]
        with pytest.raises(outbound.AddressRefused, match=r"127\.0\.0\.2 .* loopback"):
            fetch(f"http://127.0.0.2:{port}/ok")
    assert connects == ["127.0.0.1"]
    assert len(recorder.requests) == 1


def test_nothing_is_reachable_by_default_not_even_loopback(allow, connects):
    allow("")
    with serve() as (url, recorder), pytest.raises(outbound.AddressRefused, match="loopback"):
        fetch(f"{url}/ok")
    assert connects == [] and recorder.requests == []


@pytest.mark.parametrize(("address", "reason"), [
    ("169.254.169.254", "link-local"), ("10.0.0.1", "private"), ("192.168.1.10", "private"),
    ("::ffff:10.0.0.1", "private"), ("fd00::1", "private"),
    ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, nothing binds to it
])
def test_a_name_resolving_to_a_refused_address_is_refused_before_any_socket_opens(
        allow, connects, resolves, address, reason):
    allow("127.0.0.0/8,::1")
    resolves["metadata.test"] = [address]
    shown = re.escape(str(ipaddress.ip_address(address)))
    with pytest.raises(outbound.AddressRefused, match=f"metadata.test resolves to {shown}, a {reason} address"):
        fetch("http://metadata.test/latest/meta-data/")
    assert connects == []


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(allow, connects, resolves):
    """No rebinding window: the name is resolved once, and the socket goes to that address
    even if a second lookup would answer differently."""
    allow("127.0.0.0/8")
    with serve() as (url, recorder):
        port = url.rsplit(":", 1)[1]
        resolves["api.test"] = ["127.0.0.1"]
        first = fetch(f"http://api.test:{port}/ok")
        resolves["api.test"] = ["10.0.0.1"]  # a rebinding answer for any later lookup
        assert first.status == 200
    assert connects == ["127.0.0.1"]
    assert resolves["_lookups"] == ["api.test"]
    assert recorder.requests[0]["headers"]["Host"] == f"api.test:{port}"


def test_a_rebinding_name_is_refused_when_it_is_looked_up_again(allow, connects, resolves):
    allow("127.0.0.0/8")
    with serve() as (url, _):
        port = url.rsplit(":", 1)[1]
        resolves["rebind.test"] = ["10.0.0.1", "127.0.0.1"]  # the allowed address is the one used
        assert outbound.fetch("GET", f"http://rebind.test:{port}/ok", timeout=5).status == 200
        # each blocking call opens a fresh connection: a fresh lookup
        resolves["rebind.test"] = ["10.0.0.1"]
        with pytest.raises(outbound.AddressRefused, match=r"10\.0\.0\.1"):
            fetch(f"http://rebind.test:{port}/ok")
    assert connects == ["127.0.0.1"]


def test_tls_verifies_the_name_not_the_address(allow, connects, resolves, monkeypatch):
    allow("127.0.0.0/8")
    names = spy_on_tls_names(monkeypatch)
    with serve() as (url, _):
        resolves["secure.test"] = ["127.0.0.1"]
        with pytest.raises(outbound.TransportError):  # our test server speaks plain HTTP
            fetch(f"https://secure.test:{url.rsplit(':', 1)[1]}/ok")
    assert names == ["secure.test"] and connects == ["127.0.0.1"]


def test_a_host_name_in_the_allow_list_opens_that_name_only(allow, connects, resolves):
    allow("internal.test")
    with serve() as (url, _):
        port = url.rsplit(":", 1)[1]
        resolves["internal.test"] = resolves["other.test"] = ["127.0.0.1"]
        assert fetch(f"http://internal.test:{port}/ok").status == 200
        with pytest.raises(outbound.AddressRefused):
            fetch(f"http://other.test:{port}/ok")
    assert connects == ["127.0.0.1"]


def test_redirects_are_answers_never_followed(allow, connects):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        answer = fetch(f"{url}/redirect?to=http://169.254.169.254/latest")
    assert answer.status == 302
    assert len(recorder.requests) == 1 and connects == ["127.0.0.1"]


def test_proxies_from_the_environment_are_ignored(allow, connects, monkeypatch):
    allow("127.0.0.1/32")
    monkeypatch.setenv("HTTP_PROXY", "http://10.0.0.1:3128")
    monkeypatch.setenv("ALL_PROXY", "http://10.0.0.1:3128")
    with serve() as (url, _):
        assert fetch(f"{url}/ok").status == 200
    assert connects == ["127.0.0.1"]


# --- size and time (finding 4) -----------------------------------------------------------------

@pytest.mark.parametrize("shape", ["sized", "unsized"])
def test_a_response_over_the_cap_fails_the_call(allow, shape):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        with pytest.raises(outbound.ResponseTooLarge, match="1,000"):
            fetch(f"{url}/big/50000/{shape}", max_bytes=1000)
        assert len(fetch(f"{url}/big/1000/{shape}", max_bytes=1000).content) == 1000


def test_a_trickling_server_is_cut_off_at_the_deadline(allow):
    allow("127.0.0.1/32")
    # A byte every 50 ms keeps every read alive for 30 s: only the call's one deadline ends it.
    with serve() as (url, _), pytest.raises(outbound.DeadlineExceeded, match=r"timed out after 0\.5s"):
        fetch(f"{url}/trickle/30", timeout=0.5)


def test_a_compressed_body_is_refused(allow):
    allow("127.0.0.1/32")
    with serve() as (url, recorder), pytest.raises(outbound.UnsupportedEncoding, match="gzip"):
        fetch(f"{url}/gzip")
    assert recorder.requests[0]["headers"]["Accept-Encoding"] == "identity"


# --- the HTTP vertex (findings 2-4 end to end) -------------------------------------------------

def call(workspace: Any, base_url: str, path: str, input: Any = None, method: str = "GET", **destination: Any) -> Any:
    Destination.objects.create(workspace=workspace, name="api", base_url=base_url, **destination)
    doc = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": "api", "method": method,
                                                  "path": path, "retry": {"maxAttempts": 2, "backoffSeconds": 60}}}}
    helpers.publish(workspace, "http", doc)
    execution = helpers.start(workspace, "http", input or {})
    helpers.run_engine()
    return helpers.step(execution, "call")


@pytest.mark.django_db
def test_dot_segment_placeholders_do_not_climb_out_of_the_base_path(workspace, allow):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        step = call(workspace, f"{url}/api", "/v1/accounts/{$.input.a}/{$.input.b}/keys", {"a": "..", "b": ".."},
                    method="DELETE")
    assert (step.status, step.attempt) == ("FAILED", 1)  # not retried: it cannot get better
    assert "has a '..' segment" in step.error
    assert recorder.requests == []  # in particular, no DELETE /api/keys


@pytest.mark.django_db
def test_a_placeholder_is_one_literal_segment_whatever_its_value(workspace, allow):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        step = call(workspace, f"{url}/api", "/v1/accounts/{$.input.a}/keys", {"a": "x/../../.."}, method="DELETE")
    assert step.status == "FAILED"  # the test server answers 404 for /api/...
    [request] = recorder.requests
    assert (request["method"], request["path"]) == ("DELETE", "/api/v1/accounts/x%2F..%2F..%2F../keys")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/v1/../../keys", "/v1/%2e%2e/keys", "/v1/./keys"])
def test_a_literal_dot_segment_is_refused_too(workspace, allow, path):
    allow("127.0.0.1/32")
    with serve() as (url, recorder):
        step = call(workspace, f"{url}/api", path)
    assert step.status == "FAILED" and "segment" in step.error and recorder.requests == []


@pytest.mark.django_db
def test_a_refused_address_fails_the_step_without_retrying(workspace, allow, connects):
    allow("127.0.0.1/32")
    step = call(workspace, "http://127.0.0.2:9/api", "/ok")
    assert (step.status, step.attempt) == ("FAILED", 1)
    assert step.error == ("GET http://127.0.0.2:9/api/ok refused: 127.0.0.2 resolves to 127.0.0.2, a loopback "
                          "address; outbound calls reach public addresses only unless SB_OUTBOUND_ALLOW opens it")
    assert connects == []


@pytest.mark.django_db
def test_an_oversized_response_fails_the_attempt(workspace, allow):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        step = call(workspace, url, "/big/200000/unsized", max_response_bytes=50_000)
    assert step.status == "READY"  # retried later, per the vertex's retry
    assert step.error == f"GET {url}/big/200000/unsized failed: the response exceeded 50,000 bytes"


@pytest.mark.django_db
def test_a_trickling_response_fails_the_attempt_at_the_deadline(workspace, allow):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        step = call(workspace, url, "/trickle/30", timeout_seconds=0.5)  # reads alone would last 30 s
    assert step.status == "READY" and step.error == f"GET {url}/trickle/30 timed out after 0.5s"


@pytest.mark.django_db
def test_error_bodies_in_step_errors_are_short(workspace, allow):
    allow("127.0.0.1/32")
    with serve() as (url, _):
        step = call(workspace, url, "/missing")
    assert step.status == "FAILED" and "returned HTTP 404" in step.error
    assert len(step.error) < 200 and step.error.endswith("…")
    assert len(DestinationCall.objects.get().error) <= 120


@pytest.mark.django_db
def test_sb_measure_reports_the_growth_of_a_worker_fetching_an_oversized_response(capsys):
    from django.core.management import call_command

    call_command("sb_measure", "oversized-response", "--bytes", "20000000", "--cap", "2000000")
    result = json.loads(capsys.readouterr().out)
    assert result["outcome"] == {"kind": "failed", "retryable": True,
                                 "error": result["outcome"]["error"]}
    assert result["outcome"]["error"].endswith("failed: the response exceeded 2,000,000 bytes")
    assert 0 <= result["rss_growth_mb"] < 2_000_000 / 1024**2 + 1  # the cap plus at most a read's slack
    assert not Destination.objects.filter(name="sb-measure-scratch").exists()  # rolled back


def test_every_allowed_address_is_tried_in_order_and_no_other(allow, connects, resolves):
    """``localhost`` may answer ::1 first while the server listens on 127.0.0.1 only."""
    allow("127.0.0.0/8,::1")
    with serve() as (url, _):
        port = url.rsplit(":", 1)[1]
        resolves["both.test"] = ["10.0.0.1", "::1", "127.0.0.1"]
        assert fetch(f"http://both.test:{port}/ok").status == 200
    assert connects == ["::1", "127.0.0.1"]  # 10.0.0.1 was never tried
