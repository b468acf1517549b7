"""``manage.py sb_actor``: key generation (the private key goes to the caller only), signing
requests a shell script can send, listing, rotation and deactivation — and the OpenSSL
recipe in docs/examples/sb-claim.sh, for hosts without SchemaBridge."""

from __future__ import annotations

import base64
import io
import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db.models import TextField
from django.db.models.functions import Cast

from tests.support import ROOT, helpers
from tests.support.claims import as_meta, last_audit, send
from tests.support.clients import api, ok, problem
from workflows import signing
from workflows.models import AuditEvent, SystemActor, WorkflowDefinition

pytestmark = pytest.mark.django_db

PUBLISH = "/api/v1/workflows/system.rollout/versions"
SCRIPT = ROOT / "docs" / "examples" / "sb-claim.sh"


def sb_actor(*args: str) -> str:
    out = io.StringIO()
    call_command("sb_actor", *args, stdout=out)
    return out.getvalue()


def headers_from(output: str) -> dict[str, str]:
    lines = [line.split(": ", 1) for line in output.strip().splitlines()]
    return as_meta({name: value for name, value in lines})


def publish_with(client: Any, key_file: Path, tmp_path: Path, actor: str = "deployer") -> Any:
    body = tmp_path / "body.json"
    body.write_bytes(json.dumps(helpers.NOOP).encode())
    output = sb_actor("sign", "--key", str(key_file), "--actor", actor, "--workspace", "default", "POST", PUBLISH,
                      "--body", str(body))
    return send(client, "POST", PUBLISH, body.read_bytes(), headers_from(output))


def test_keygen_writes_the_private_key_for_the_caller_and_registers_only_the_public_key(
        workspace: Any, tmp_path: Path) -> None:
    key_file = tmp_path / "deployer.pem"
    output = sb_actor("keygen", "deployer", "--patterns", "system.deploy.*,system.rollout", "--out", str(key_file))
    assert "Registered system actor 'deployer'" in output and str(key_file) in output
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = signing.load_private_pem(key_file.read_bytes())
    actor = SystemActor.objects.get(name="deployer")
    assert actor.public_key == signing.public_text(key) and actor.patterns == ["system.deploy.*", "system.rollout"]
    secret = base64.b64encode(key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                serialization.NoEncryption())).decode()
    stored = " ".join(str(value) for value in SystemActor.objects.values().get().values())
    audited = " ".join(AuditEvent.objects.annotate(text=Cast("detail", TextField())).values_list("text", flat=True))
    assert secret not in stored and secret not in audited and "PRIVATE" not in stored
    assert last_audit("actor.register").actor == "cli:sb_actor"


def test_keygen_refuses_to_overwrite_a_key_or_to_register_a_name_twice(workspace: Any, tmp_path: Path) -> None:
    key_file = tmp_path / "deployer.pem"
    sb_actor("keygen", "deployer", "--out", str(key_file))
    before = key_file.read_bytes()
    with pytest.raises(CommandError, match="exists"):
        sb_actor("keygen", "other", "--out", str(key_file))
    assert key_file.read_bytes() == before
    with pytest.raises(CommandError, match="already has an active key; rotate it instead"):
        sb_actor("keygen", "deployer", "--out", str(tmp_path / "second.pem"))
    assert not (tmp_path / "second.pem").exists()
    with pytest.raises(CommandError, match="not a key pattern"):
        sb_actor("keygen", "bad", "--patterns", "system.*;rm", "--out", str(tmp_path / "bad.pem"))
    assert not (tmp_path / "bad.pem").exists()


def test_sign_prints_headers_that_the_api_accepts(workspace: Any, tmp_path: Path) -> None:
    key_file = tmp_path / "deployer.pem"
    sb_actor("keygen", "deployer", "--out", str(key_file))
    response = publish_with(api(workspace, "author"), key_file, tmp_path)
    assert ok(response, 201)["key"] == "system.rollout"
    assert WorkflowDefinition.objects.get(key="system.rollout").current_version.author.startswith("actor:deployer")


def test_sign_reads_the_body_from_standard_input_and_prints_curl_arguments(
        workspace: Any, tmp_path: Path, monkeypatch: Any) -> None:
    key_file = tmp_path / "deployer.pem"
    sb_actor("keygen", "deployer", "--out", str(key_file))
    body = json.dumps({"workflow": "system.rollout"}).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(body)))
    output = sb_actor("sign", "--key", str(key_file), "--actor", "deployer", "--workspace", "ops", "post",
                      "/api/v1/executions", "--body", "-", "--format", "curl", "--deployment", "prod-eu")
    lines = output.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("-H 'X-SB-") for line in lines)
    headers = {line[4:-1].split(": ")[0]: line[4:-1].split(": ")[1] for line in lines}
    claim = signing.parse(headers.get)
    assert claim is not None
    public_key = SystemActor.objects.get().public_key
    assert signing.verifies(public_key, claim, "POST", "/api/v1/executions", body,
                            scope=signing.Scope("prod-eu", "ops"))
    assert not signing.verifies(public_key, claim, "POST", "/api/v1/executions", body,
                                scope=signing.Scope(settings.SB["DEPLOYMENT_ID"], "ops"))


def test_deployment_prints_the_id_that_claims_sign(workspace: Any) -> None:
    assert sb_actor("deployment").strip() == settings.SB["DEPLOYMENT_ID"]


def test_sign_refuses_a_file_that_is_not_an_ed25519_key(workspace: Any, tmp_path: Path) -> None:
    not_a_key = tmp_path / "x.pem"
    not_a_key.write_text("hello")
    with pytest.raises(CommandError, match="not an unencrypted PEM private key"):
        sb_actor("sign", "--key", str(not_a_key), "--actor", "deployer", "--workspace", "default", "GET",
                 "/api/v1/workflows")


def test_rotate_replaces_the_key_and_the_old_one_is_refused(workspace: Any, tmp_path: Path) -> None:
    old_key, new_key = tmp_path / "old.pem", tmp_path / "new.pem"
    sb_actor("keygen", "deployer", "--out", str(old_key))
    output = sb_actor("rotate", "deployer", "--out", str(new_key))
    assert "old key is deactivated" in output and stat.S_IMODE(new_key.stat().st_mode) == 0o600
    client = api(workspace, "author")
    body = problem(publish_with(client, old_key, tmp_path), 403)
    assert body["code"] == "claim-refused" and "does not verify" in body["detail"]
    ok(publish_with(client, new_key, tmp_path), 201)
    assert SystemActor.objects.filter(name="deployer").count() == 2
    assert SystemActor.objects.filter(name="deployer", active=True).count() == 1
    rotation = last_audit("actor.rotate")
    assert rotation.detail["replaced"] != rotation.detail["key"]
    listing = sb_actor("list", "--all")
    assert listing.count("deployer") == 2 and " no " in listing
    assert sb_actor("list").count("deployer") == 1


def test_rotate_may_narrow_the_patterns(workspace: Any, tmp_path: Path) -> None:
    sb_actor("keygen", "deployer", "--out", str(tmp_path / "old.pem"))
    sb_actor("rotate", "deployer", "--out", str(tmp_path / "new.pem"), "--patterns", "system.deploy.*")
    body = problem(publish_with(api(workspace, "author"), tmp_path / "new.pem", tmp_path), 403)
    assert body["code"] == "reserved-key" and "may not claim 'system.rollout'" in body["detail"]


def test_deactivate_refuses_later_claims(workspace: Any, tmp_path: Path) -> None:
    key_file = tmp_path / "deployer.pem"
    sb_actor("keygen", "deployer", "--out", str(key_file))
    assert "Deactivated system actor 'deployer'" in sb_actor("deactivate", "deployer")
    body = problem(publish_with(api(workspace, "author"), key_file, tmp_path), 403)
    assert "deactivated" in body["detail"]
    with pytest.raises(CommandError, match="no active system actor"):
        sb_actor("deactivate", "deployer")
    assert last_audit("actor.deactivate").target == "deployer"


def _openssl(*args: str) -> bytes:
    return subprocess.run(["openssl", *args], check=True, capture_output=True).stdout


def test_the_openssl_recipe_signs_claims_the_api_accepts(workspace: Any, tmp_path: Path) -> None:
    """A key made and used only by OpenSSL: ``register`` takes its public half, and
    docs/examples/sb-claim.sh signs with the private half."""
    private, public = tmp_path / "ci.pem", tmp_path / "ci.pub.pem"
    _openssl("genpkey", "-algorithm", "ed25519", "-out", str(private))
    _openssl("pkey", "-in", str(private), "-pubout", "-out", str(public))
    sb_actor("register", "ci-bot", "--public-key", str(public), "--patterns", "system.*")
    body = tmp_path / "body.json"
    body.write_bytes(json.dumps(helpers.NOOP).encode())
    scope = [settings.SB["DEPLOYMENT_ID"], "default"]
    output = subprocess.run(["bash", str(SCRIPT), str(private), "ci-bot", *scope, "post", PUBLISH, str(body)],
                            check=True, capture_output=True, text=True).stdout
    client = api(workspace, "author")
    assert ok(send(client, "POST", PUBLISH, body.read_bytes(), headers_from(output)), 201)["created"] is True
    # A body-less request signs the empty body.
    output = subprocess.run(["bash", str(SCRIPT), str(private), "ci-bot", *scope, "GET", "/api/v1/workflows"],
                            check=True, capture_output=True, text=True).stdout
    ok(send(client, "GET", "/api/v1/workflows", b"", headers_from(output)))
    assert last_audit("claim").outcome == "accepted"
