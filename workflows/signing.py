"""The signed-claim format (S15), shared by the server and its clients. Pure Python: no
Django, only ``cryptography``, so a CI job can sign without the project's settings.

A system actor signs, with its Ed25519 private key, one canonical statement per request::

    sb-claim-v2
    <deployment id>        (the server's SB_DEPLOYMENT_ID)
    <workspace slug>       (the workspace of the API token the claim comes with)
    POST
    /api/v1/workflows/system.rollout/versions
    <SHA-256 of the request body, 64 lowercase hex digits>
    1767225600
    <nonce>
    <actor name>

(nine lines joined by ``\\n``, no trailing newline; the path with its query string, if any)
and sends four headers: ``X-SB-Actor``, ``X-SB-Timestamp`` (Unix seconds), ``X-SB-Nonce``
(16-128 of ``A-Z a-z 0-9 _ -``, never reused) and ``X-SB-Signature`` (the 64-byte
signature, standard base64). The deployment and workspace lines bind a claim to one
server and one workspace: it cannot be replayed on another deployment that registered the
same key, nor used with a token of another workspace.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

VERSION = "sb-claim-v2"
ACTOR, TIMESTAMP, NONCE, SIGNATURE = "X-SB-Actor", "X-SB-Timestamp", "X-SB-Nonce", "X-SB-Signature"
HEADERS = (ACTOR, TIMESTAMP, NONCE, SIGNATURE)

ACTOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
DEPLOYMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")
WORKSPACE_SLUG = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_TIMESTAMP = re.compile(r"0|[1-9][0-9]{0,11}")
_SIGNATURE = re.compile(r"[A-Za-z0-9+/]{86}==")


class MalformedClaim(ValueError):
    """Claim headers that are incomplete or not in the format above."""


@dataclass(frozen=True)
class Claim:
    actor: str
    timestamp: int
    nonce: str
    signature: bytes


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Scope:
    """Where a claim is valid: one deployment (``SB_DEPLOYMENT_ID``) and one workspace (slug)."""

    deployment: str
    workspace: str

    def __post_init__(self) -> None:
        if not DEPLOYMENT_ID.fullmatch(self.deployment):
            raise MalformedClaim(f"'{self.deployment}' is not a deployment id (1-100 letters, digits, '.', '_', "
                                 "':', '-')")
        if not WORKSPACE_SLUG.fullmatch(self.workspace):
            raise MalformedClaim(f"'{self.workspace}' is not a workspace slug")


def statement(method: str, path: str, body: bytes, *, scope: Scope, timestamp: int, nonce: str,
              actor: str) -> bytes:
    """The exact bytes a system actor signs for one request."""
    return "\n".join([VERSION, scope.deployment, scope.workspace, method.upper(), path, body_digest(body),
                      str(timestamp), nonce, actor]).encode()


def sign(key: Ed25519PrivateKey, method: str, path: str, body: bytes, *, actor: str, scope: Scope,
         timestamp: int | None = None, nonce: str | None = None) -> dict[str, str]:
    """The claim headers for one request to ``scope`` (a fresh nonce and the current time by
    default)."""
    if not ACTOR_NAME.fullmatch(actor):
        raise MalformedClaim(f"'{actor}' is not an actor name (letters, digits, '.', '_', '-')")
    timestamp = int(time.time()) if timestamp is None else timestamp
    nonce = nonce or secrets.token_urlsafe(24)
    signature = key.sign(statement(method, path, body, scope=scope, timestamp=timestamp, nonce=nonce, actor=actor))
    return {ACTOR: actor, TIMESTAMP: str(timestamp), NONCE: nonce, SIGNATURE: base64.b64encode(signature).decode()}


def present(header: Callable[[str], str | None]) -> bool:
    """Whether a request carries any claim header (then it is a claim attempt)."""
    return any(header(name) is not None for name in HEADERS)


def parse(header: Callable[[str], str | None]) -> Claim | None:
    """The claim in a request's headers: ``None`` when it carries no ``X-SB-*`` header at all,
    ``MalformedClaim`` when it carries some but not a complete, well-formed claim."""
    if not present(header):
        return None
    values = {name: header(name) for name in HEADERS}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise MalformedClaim(f"incomplete claim: missing {', '.join(missing)}")
    actor, timestamp, nonce, signature = (str(values[name]) for name in HEADERS)
    problems = [
        f"{ACTOR} is not an actor name" if not ACTOR_NAME.fullmatch(actor) else "",
        f"{TIMESTAMP} is not whole Unix seconds" if not _TIMESTAMP.fullmatch(timestamp) else "",
        f"{NONCE} is not 16-128 characters of A-Z a-z 0-9 _ -" if not _NONCE.fullmatch(nonce) else "",
        f"{SIGNATURE} is not a base64 Ed25519 signature" if not _SIGNATURE.fullmatch(signature) else "",
    ]
    if any(problems):
        raise MalformedClaim("malformed claim: " + "; ".join(p for p in problems if p))
    return Claim(actor, int(timestamp), nonce, base64.b64decode(signature, validate=True))


def verifies(public_key: str, claim: Claim, method: str, path: str, body: bytes, *, scope: Scope) -> bool:
    """Whether ``claim`` is ``public_key``'s signature of this request's statement in ``scope``."""
    message = statement(method, path, body, scope=scope, timestamp=claim.timestamp, nonce=claim.nonce,
                        actor=claim.actor)
    try:
        load_public(public_key).verify(claim.signature, message)
    except InvalidSignature:
        return False
    return True


# --- keys ---------------------------------------------------------------------------------------

def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def load_private_pem(data: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise ValueError(f"not an unencrypted PEM private key: {error}") from error
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"not an Ed25519 key but {type(key).__name__}")
    return key


def public_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """A public key as stored: its raw 32 bytes, base64."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return base64.b64encode(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def load_public(text: str) -> Ed25519PublicKey:
    """A public key from its stored form (raw, base64) or a PEM ``PUBLIC KEY`` block."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError(f"not an Ed25519 key but {type(key).__name__}")
            return key
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error) as error:
        raise ValueError(f"not an Ed25519 public key: {error}") from error


def fingerprint(public_key: str) -> str:
    """A short, stable name for a public key (to compare keys without printing them whole)."""
    return "SHA256:" + hashlib.sha256(load_public(public_key).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)).hexdigest()[:16]
