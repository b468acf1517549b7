"""The signed-claim format (S15) without a database: the exact statement, and that changing
any part of a request breaks the signature."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from workflows import signing

# RFC 8032 test vector 1's private key, so the signature below is reproducible anywhere.
SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
KEY = Ed25519PrivateKey.from_private_bytes(SEED)
SCOPE = signing.Scope("prod-eu", "default")


def test_the_statement_is_nine_lines_without_a_trailing_newline() -> None:
    statement = signing.statement("post", "/api/v1/workflows/system.x/versions?dry=1", b"{}", scope=SCOPE,
                                  timestamp=1767225600, nonce="n0nce-n0nce-n0nce", actor="deployer")
    assert statement == (b"sb-claim-v2\nprod-eu\ndefault\nPOST\n/api/v1/workflows/system.x/versions?dry=1\n"
                         b"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\n"
                         b"1767225600\nn0nce-n0nce-n0nce\ndeployer")


def test_a_known_signature_is_stable() -> None:
    headers = signing.sign(KEY, "POST", "/api/v1/executions", b'{"workflow": "system.x"}', actor="deployer",
                           scope=SCOPE, timestamp=1767225600, nonce="n0nce-n0nce-n0nce")
    assert headers == {
        "X-SB-Actor": "deployer", "X-SB-Timestamp": "1767225600", "X-SB-Nonce": "n0nce-n0nce-n0nce",
        # Ed25519 is deterministic: a change to the statement format changes this value.
        "X-SB-Signature": "yU9Qx55ERNHvJ/U4TtnqHl1KqK9VLzgi+w/akdQiPjNRUY8mLKcGvofUVldZse6rKWY/cyqsZh98j6J6qEu8CQ==",
    }
    assert signing.public_text(KEY) == "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="  # RFC 8032 vector 1


REQUEST = ("POST", "/api/v1/workflows/system.x/versions", b'{"start": "t"}')


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PUT", REQUEST[1], REQUEST[2]),
    (REQUEST[0], "/api/v1/workflows/system.y/versions", REQUEST[2]),
    (REQUEST[0], REQUEST[1] + "?x=1", REQUEST[2]),
    (REQUEST[0], REQUEST[1], b'{"start": "u"}'),
    (REQUEST[0], REQUEST[1], b""),
])
def test_a_signature_covers_method_path_and_body(method: str, path: str, body: bytes) -> None:
    claim = signing.parse(signing.sign(KEY, *REQUEST, actor="deployer", scope=SCOPE).get)
    assert claim is not None
    assert signing.verifies(signing.public_text(KEY), claim, *REQUEST, scope=SCOPE)
    assert not signing.verifies(signing.public_text(KEY), claim, method, path, body, scope=SCOPE)


@pytest.mark.parametrize("field", ["X-SB-Actor", "X-SB-Timestamp", "X-SB-Nonce"])
def test_a_signature_covers_the_claim_headers(field: str) -> None:
    headers = signing.sign(KEY, *REQUEST, actor="deployer", scope=SCOPE, timestamp=1767225600,
                           nonce="n0nce-n0nce-n0nce")
    headers[field] = {"X-SB-Actor": "root", "X-SB-Timestamp": "1767225601", "X-SB-Nonce": "n0nce-n0nce-n0ncf"}[field]
    claim = signing.parse(headers.get)
    assert claim is not None and not signing.verifies(signing.public_text(KEY), claim, *REQUEST, scope=SCOPE)


def test_another_key_does_not_verify() -> None:
    claim = signing.parse(signing.sign(KEY, *REQUEST, actor="deployer", scope=SCOPE).get)
    assert claim is not None
    assert not signing.verifies(signing.public_text(signing.new_private_key()), claim, *REQUEST, scope=SCOPE)


def test_no_claim_headers_is_no_claim() -> None:
    assert signing.parse({}.get) is None


@pytest.mark.parametrize(("change", "message"), [
    ({"X-SB-Signature": None}, "incomplete claim: missing X-SB-Signature"),
    ({"X-SB-Actor": None, "X-SB-Nonce": None}, "missing X-SB-Actor, X-SB-Nonce"),
    ({"X-SB-Timestamp": "-5"}, "X-SB-Timestamp is not whole Unix seconds"),
    ({"X-SB-Timestamp": "017"}, "X-SB-Timestamp is not whole Unix seconds"),
    ({"X-SB-Nonce": "a" * 15}, "X-SB-Nonce is not 16-128"),
    ({"X-SB-Nonce": "a" * 15 + "\n"}, "X-SB-Nonce is not 16-128"),
    ({"X-SB-Actor": "de\nployer"}, "X-SB-Actor is not an actor name"),
    ({"X-SB-Signature": base64.b64encode(b"x" * 63).decode()}, "not a base64 Ed25519 signature"),
])
def test_malformed_claims_say_what_is_wrong(change: dict[str, str | None], message: str) -> None:
    headers: dict[str, str | None] = {**signing.sign(KEY, *REQUEST, actor="deployer", scope=SCOPE), **change}
    with pytest.raises(signing.MalformedClaim, match=message):
        signing.parse(headers.get)


def test_public_keys_load_from_base64_or_pem() -> None:
    from cryptography.hazmat.primitives import serialization

    pem = KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    assert signing.public_text(signing.load_public(pem)) == signing.public_text(KEY)
    assert signing.fingerprint(pem) == signing.fingerprint(signing.public_text(KEY))
    with pytest.raises(ValueError, match="not an Ed25519 public key"):
        signing.load_public("bm90IGEga2V5")


@pytest.mark.parametrize("scope", [signing.Scope("staging", "default"), signing.Scope("prod-eu", "other")])
def test_a_signature_covers_the_deployment_and_the_workspace(scope: signing.Scope) -> None:
    claim = signing.parse(signing.sign(KEY, *REQUEST, actor="deployer", scope=SCOPE).get)
    assert claim is not None
    assert signing.verifies(signing.public_text(KEY), claim, *REQUEST, scope=SCOPE)
    assert not signing.verifies(signing.public_text(KEY), claim, *REQUEST, scope=scope)


@pytest.mark.parametrize(("deployment", "workspace"), [("", "default"), ("prod\neu", "default"), ("prod", ""),
                                                       ("prod", "a\nb")])
def test_a_scope_is_one_line_each(deployment: str, workspace: str) -> None:
    with pytest.raises(signing.MalformedClaim):
        signing.Scope(deployment, workspace)
