"""The outbound HTTP contracts on the event loop (``outbound.fetch_async``, used by HTTP steps
in a drain): the same checks as the blocking client, observed on loopback test servers.

Refusals of other addresses are proven without sending a packet: the resolver is patched and
the event loop's ``sock_connect`` — where the transport's connector connects a socket — is
spied on (and refuses anything but loopback)."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from executions.destinations import http11, outbound
from executions.destinations import rules as destinations
from executions.models import Destination, DestinationCall, Step
from tests.support import helpers
from tests.support.awkward_server import AwkwardServer, keep_alive
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
    # A byte every 50 ms keeps every read alive for 30 s: only the call's one deadline ends it.
    with serve() as (url, _), pytest.raises(outbound.DeadlineExceeded, match=r"timed out after 0\.5s"):
        fetch(f"{url}/trickle/30", timeout=0.5)


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


# --- TLS: the certificate is verified against the name called -----------------------------------

def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for DNS name ``name`` and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
                   .not_valid_after(now + dt.timedelta(hours=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.mark.parametrize("served_as, verified", [("localhost", True), ("elsewhere.test", False)],
                         ids=["name-matches", "name-differs"])
def test_https_verifies_the_certificate_against_the_name_called(allow, monkeypatch, tmp_path, served_as, verified):
    allow("127.0.0.0/8,::1")
    cert_file, key_file = _certificate(tmp_path, served_as)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert_file, key_file)
    client_side = ssl.create_default_context(cafile=str(cert_file))  # trusts this certificate only
    monkeypatch.setattr(http11, "ssl_context", lambda: client_side)

    async def scenario() -> tuple[int, Any, int]:
        async with AwkwardServer(keep_alive, tls=server_side) as server:
            url = server.url.replace("http://127.0.0.1", "https://localhost")
            first = await outbound.fetch_async("POST", f"{url}/x", json_body={"i": 1}, timeout=5, pool="tls")
            second = await outbound.fetch_async("POST", f"{url}/x", json_body={"i": 2}, timeout=5, pool="tls")
            assert first.body() == {"n": 1}
            return second.status, second.body(), server.connections

    async def main() -> Any:
        try:
            return await scenario()
        finally:
            await outbound.close_async_clients()

    if verified:
        assert asyncio.run(main()) == (200, {"n": 2}, 1), "both calls over one kept-alive TLS connection"
    else:
        with pytest.raises(outbound.TransportError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            asyncio.run(main())
