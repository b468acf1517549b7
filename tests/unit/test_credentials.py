"""Destination credentials without a database: shapes, sealing, key rotation, redaction."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from executions.destinations import credentials


@pytest.fixture
def key(settings) -> str:
    value = Fernet.generate_key().decode()
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": value}
    return value


def test_sealed_credentials_open_with_the_key_and_after_rotation(key, settings):
    sealed = credentials.seal({"bearer": "t0ken"})
    assert "t0ken" not in sealed and credentials.unseal(sealed) == {"bearer": "t0ken"}
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": f"{Fernet.generate_key().decode()},{key}"}  # rotated
    assert credentials.unseal(sealed) == {"bearer": "t0ken"}
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": Fernet.generate_key().decode()}  # the old key is gone
    with pytest.raises(credentials.CredentialsError, match="cannot be opened"):
        credentials.unseal(sealed)


def test_a_bad_key_fails_the_system_check(settings):
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": "not-a-fernet-key"}
    [error] = credentials.credentials_key_is_valid(None)
    assert error.id == "schemabridge.E021"
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": ""}
    assert credentials.credentials_key_is_valid(None) == []


def test_headers_and_the_strings_redacted():
    basic = {"basic": {"username": "u", "password": "pw secret"}}
    assert credentials.headers(basic) == {"Authorization": "Basic dTpwdyBzZWNyZXQ="}
    hidden = credentials.secrets(basic)
    assert credentials.redact("got Basic dTpwdyBzZWNyZXQ= for pw secret", hidden) == \
        "got Basic [redacted] for [redacted]"
    assert credentials.redact("X-Api-Key: k-1", credentials.secrets({"headers": {"X-Api-Key": "k-1"}})) == \
        "X-Api-Key: [redacted]"
