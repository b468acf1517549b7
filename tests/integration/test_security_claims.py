"""S15 over the API: reserved workflow keys are touched only with a system actor's valid
signed claim. Every refusal is a 403 with its reason and an audit row; a valid claim is
accepted for each protected operation."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from executions.models import Execution
from tests.support import handlers, helpers
from tests.support.claims import (
    Actor,
    claim,
    last_audit,
    make_actor,
    now,
    publish_system,
    send,
    signed,
    start_system,
)
from tests.support.clients import api, ok, problem, session
from tests.support.factories import member
from tests.support.threads import race
from workflows import actors, claims, signing
from workflows.access import create_token, revoke_token
from workflows.models import AuditEvent, ClaimNonce, WorkflowDefinition

pytestmark = pytest.mark.django_db

PUBLISH = "/api/v1/workflows/system.rollout/versions"
WAIT = {"start": "w", "vertices": {"w": {"type": "TIMER", "seconds": 3600}}}


@pytest.fixture
def deployer(workspace: Any) -> Actor:
    return make_actor("deployer", ("system.*",))


def refused_claim(response: Any, reason: str) -> AuditEvent:
    """The request was refused for its claim (403 claim-refused) and that was audited."""
    body = problem(response, 403)
    assert body["code"] == "claim-refused", body
    assert reason in body["detail"], body["detail"]
    row = last_audit("claim")
    assert row.outcome == "refused" and reason in row.reason, (row.outcome, row.reason)
    return row


def assert_nothing_published() -> None:
    assert not WorkflowDefinition.objects.filter(key="system.rollout").exists()


# --- refusals ---------------------------------------------------------------------------------

def test_a_forged_signature_is_refused_and_audited(workspace: Any, deployer: Actor) -> None:
    client = api(workspace, "admin")
    headers = claim(deployer, "POST", PUBLISH, b"{}")
    forged = bytearray(base64.b64decode(headers["HTTP_X_SB_SIGNATURE"]))
    forged[0] ^= 0x01
    headers["HTTP_X_SB_SIGNATURE"] = base64.b64encode(bytes(forged)).decode()
    row = refused_claim(send(client, "POST", PUBLISH, helpers.NOOP, headers), "does not verify")
    assert row.actor == "actor:deployer" and row.target == f"POST {PUBLISH}"
    assert row.detail["via"] == "token:test-admin"
    assert_nothing_published()


def test_a_signature_over_another_body_or_path_is_refused(workspace: Any, deployer: Actor) -> None:
    client = api(workspace, "admin")
    harmless = b'{"start": "t", "vertices": {"t": {"type": "SUCCEED"}}}'
    headers = claim(deployer, "POST", PUBLISH, harmless)
    refused_claim(send(client, "POST", PUBLISH, helpers.NOOP, headers), "does not verify")
    elsewhere = claim(deployer, "POST", "/api/v1/workflows/system.other/versions", b"{}")
    refused_claim(send(client, "POST", PUBLISH, b"{}", elsewhere), "does not verify")
    wrong_method = claim(deployer, "PUT", PUBLISH, b"{}")
    refused_claim(send(client, "POST", PUBLISH, b"{}", wrong_method), "does not verify")
    assert_nothing_published()


def test_a_claim_signed_with_the_wrong_key_is_refused(workspace: Any, deployer: Actor) -> None:
    client = api(workspace, "admin")
    response = signed(client, deployer, "POST", PUBLISH, helpers.NOOP, key=signing.new_private_key())
    refused_claim(response, "does not verify with the registered key of system actor 'deployer'")
    other = make_actor("other", ("system.*",))  # a real actor's key, under the wrong name
    response = signed(client, deployer, "POST", PUBLISH, helpers.NOOP, key=other.key)
    refused_claim(response, "does not verify")
    assert_nothing_published()


@pytest.mark.parametrize(("deployment", "workspace_slug"), [("another-deployment", "default"), (None, "other")])
def test_a_claim_signed_for_another_deployment_or_workspace_is_refused(
        workspace: Any, deployer: Actor, deployment: str | None, workspace_slug: str) -> None:
    """Issue 15, finding 9: the same key registered on two deployments, or a token of another
    workspace, does not make a claim valid there."""
    scope = signing.Scope(deployment or settings.SB["DEPLOYMENT_ID"], workspace_slug)
    response = signed(api(workspace, "author"), deployer, "POST", PUBLISH, helpers.NOOP, scope=scope)
    row = refused_claim(response, "does not verify")
    assert f"this is deployment '{settings.SB['DEPLOYMENT_ID']}', workspace 'default'" in row.reason
    assert_nothing_published()


def test_an_inactive_actor_is_refused(workspace: Any, deployer: Actor) -> None:
    actors.deactivate(deployer.row, by="test")
    response = signed(api(workspace, "admin"), deployer, "POST", PUBLISH, helpers.NOOP)
    refused_claim(response, "system actor 'deployer' is deactivated")
    assert_nothing_published()


def test_an_unknown_actor_is_refused(workspace: Any, deployer: Actor) -> None:
    response = signed(api(workspace, "admin"), deployer, "POST", PUBLISH, helpers.NOOP, name="ghost")
    refused_claim(response, "no system actor 'ghost' is registered")


@pytest.mark.parametrize(("offset", "reason"), [(-400, "s old"), (+400, "s in the future"),
                                                 (-310, "s old"), (+310, "in the future")])
def test_a_stale_or_future_timestamp_is_refused(workspace: Any, deployer: Actor, offset: int, reason: str) -> None:
    response = signed(api(workspace, "admin"), deployer, "POST", PUBLISH, helpers.NOOP, timestamp=now() + offset)
    row = refused_claim(response, reason)
    assert "300 s either side of the server's clock" in row.reason
    assert not ClaimNonce.objects.exists()  # a refused claim spends no nonce
    assert_nothing_published()


@pytest.mark.parametrize("offset", [-250, +250])
def test_a_timestamp_inside_the_window_is_accepted(workspace: Any, deployer: Actor, offset: int) -> None:
    response = signed(api(workspace, "author"), deployer, "POST", PUBLISH, helpers.NOOP, timestamp=now() + offset)
    ok(response, 201)


def test_the_window_is_checked_on_the_database_clock(workspace: Any, deployer: Actor, monkeypatch: Any) -> None:
    headers = claim(deployer, "POST", PUBLISH, b"{}")  # signed now; then the web host's clock goes wrong
    monkeypatch.setattr("time.time", lambda: 4_000_000_000.0)
    response = send(api(workspace, "author"), "POST", PUBLISH, b"{}", headers)
    assert problem(response, 400)["code"] == "invalid-workflow"  # the claim passed; the document is empty


def test_a_replayed_nonce_is_refused(workspace: Any, deployer: Actor) -> None:
    client = api(workspace, "author")
    body = b'{"start": "t", "vertices": {"t": {"type": "SUCCEED"}}}'
    headers = claim(deployer, "POST", PUBLISH, body)
    ok(send(client, "POST", PUBLISH, body, headers), 201)
    nonce = headers["HTTP_X_SB_NONCE"]
    refused_claim(send(client, "POST", PUBLISH, body, headers), f"nonce '{nonce}' was already used")
    # The same nonce in a freshly signed claim is still a replay.
    again = claim(deployer, "POST", PUBLISH, body, nonce=nonce)
    refused_claim(send(client, "POST", PUBLISH, body, again), "already used")
    assert ClaimNonce.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_replays_are_decided_by_the_unique_constraint(workspace: Any, deployer: Actor) -> None:
    request = claims.HttpRequest("POST", PUBLISH, b"{}")
    header = claim(deployer, "POST", PUBLISH, b"{}")
    names = {name: header["HTTP_" + name.upper().replace("-", "_")] for name in signing.HEADERS}

    def attempt() -> str:
        try:
            claims.verify(names.get, request, workspace=workspace, via="test")
            return "accepted"
        except claims.ClaimRefused as refusal:
            return str(refusal)

    outcomes = race(*[attempt] * 4)
    assert sorted(outcomes)[0] == "accepted" and outcomes.count("accepted") == 1, outcomes
    assert all("already used" in outcome for outcome in outcomes if outcome != "accepted")
    assert list(AuditEvent.objects.filter(action="claim").values_list("outcome", flat=True).order_by("outcome")) \
        == ["accepted", "refused", "refused", "refused"]


def test_old_nonces_are_pruned(workspace: Any, deployer: Actor) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO workflows_claimnonce (nonce, actor_id, claimed_at, created_at) "
                       "VALUES ('an-old-nonce-0000', %s, now() - interval '301 seconds', now()), "
                       "('a-recent-nonce-00', %s, now() - interval '200 seconds', now())",
                       [deployer.row.pk, deployer.row.pk])
    ok(signed(api(workspace, "author"), deployer, "POST", PUBLISH, helpers.NOOP), 201)
    kept = set(ClaimNonce.objects.values_list("nonce", flat=True))
    assert "a-recent-nonce-00" in kept and "an-old-nonce-0000" not in kept and len(kept) == 2


@pytest.mark.parametrize(("drop", "reason"), [
    ("HTTP_X_SB_SIGNATURE", "incomplete claim: missing X-SB-Signature"),
    ("HTTP_X_SB_NONCE", "incomplete claim: missing X-SB-Nonce"),
])
def test_an_incomplete_claim_is_refused(workspace: Any, deployer: Actor, drop: str, reason: str) -> None:
    headers = claim(deployer, "POST", PUBLISH, b"{}")
    del headers[drop]
    refused_claim(send(api(workspace, "admin"), "POST", PUBLISH, b"{}", headers), reason)


@pytest.mark.parametrize(("header", "value", "reason"), [
    ("HTTP_X_SB_TIMESTAMP", "yesterday", "X-SB-Timestamp is not whole Unix seconds"),
    ("HTTP_X_SB_NONCE", "short", "X-SB-Nonce is not 16-128 characters"),
    ("HTTP_X_SB_SIGNATURE", "bm90IGEgc2lnbmF0dXJl", "X-SB-Signature is not a base64 Ed25519 signature"),
    ("HTTP_X_SB_ACTOR", "de ployer", "X-SB-Actor is not an actor name"),
])
def test_a_malformed_claim_is_refused(workspace: Any, deployer: Actor, header: str, value: str, reason: str) -> None:
    headers = claim(deployer, "POST", PUBLISH, b"{}")
    headers[header] = value
    refused_claim(send(api(workspace, "admin"), "POST", PUBLISH, b"{}", headers), reason)


def test_a_pattern_mismatch_is_refused_and_audited(workspace: Any) -> None:
    billing = make_actor("billing-bot", ("system.billing.*",))
    response = signed(api(workspace, "admin"), billing, "POST", PUBLISH, helpers.NOOP)
    body = problem(response, 403)
    assert body["code"] == "reserved-key"
    assert "system actor 'billing-bot' may not claim 'system.rollout'" in body["detail"]
    assert "system.billing.*" in body["detail"]
    refusal = last_audit("workflow.publish")
    assert refusal.outcome == "refused" and "may not claim 'system.rollout'" in refusal.reason
    assert refusal.actor == "actor:billing-bot via token:test-admin"
    assert last_audit("claim").outcome == "accepted"  # the signature was fine; the key was not its to claim
    assert_nothing_published()
    ok(signed(api(workspace, "author"), billing, "POST", "/api/v1/workflows/system.billing.close/versions",
              helpers.NOOP), 201)


def test_a_claim_must_come_with_a_token(workspace: Any, deployer: Actor) -> None:
    audit_rows = AuditEvent.objects.count()
    body = problem(signed(APIClient(), deployer, "POST", PUBLISH, helpers.NOOP), 403)
    assert body["code"] == "claim-refused" and "must accompany an API token" in body["detail"]
    assert AuditEvent.objects.count() == audit_rows  # no credentials: nothing is written (issue 15, finding 6)
    superuser = session(member(workspace, "admin", "alice", is_superuser=True), APIClient)
    row = refused_claim(signed(superuser, deployer, "POST", PUBLISH, helpers.NOOP), "must accompany an API token")
    assert row.detail["via"] == "user:alice" and row.workspace == workspace and row.detail["ip"] == "127.0.0.1"
    assert_nothing_published()


def test_a_claim_with_a_refused_token_is_refused_and_writes_nothing(workspace: Any, deployer: Actor) -> None:
    token, secret = create_token(workspace, name="old", role="admin")
    revoke_token(token)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    audit_rows = AuditEvent.objects.count()
    problem(signed(client, deployer, "POST", PUBLISH, helpers.NOOP), 401)
    assert AuditEvent.objects.count() == audit_rows  # refused credentials are no credentials (finding 6)


def test_a_claim_grants_no_role(workspace: Any, deployer: Actor) -> None:
    """The role is checked before the body is read, so before the claim (which signs the body)
    is verified: the refusal is the role's, audited as such."""
    response = signed(api(workspace, "viewer"), deployer, "POST", PUBLISH, helpers.NOOP)
    assert "viewer role cannot publish" in problem(response, 403)["detail"]
    assert last_audit("workflow.publish").outcome == "refused"
    assert not ClaimNonce.objects.exists()  # the claim was never spent: it can still be used with a right token
    assert_nothing_published()


def test_a_claim_on_an_ordinary_key_changes_nothing_but_the_label(workspace: Any, deployer: Actor) -> None:
    response = signed(api(workspace, "author"), deployer, "POST", "/api/v1/workflows/flow/versions", helpers.NOOP)
    ok(response, 201)
    assert last_audit("workflow.publish").actor == "actor:deployer via token:test-author"


def test_a_claim_on_a_read_is_verified_and_audited(workspace: Any, deployer: Actor) -> None:
    ok(signed(api(workspace, "viewer"), deployer, "GET", "/api/v1/workflows?limit=5"))
    row = last_audit("claim")
    assert row.outcome == "accepted" and row.target == "GET /api/v1/workflows?limit=5"
    problem(signed(api(workspace, "viewer"), deployer, "GET", "/api/v1/workflows?limit=5",
                   timestamp=now() - 1000), 403)


# --- the protected operations: refused without a claim, accepted with one ----------------------------

def _failed_system_fanout(workspace: Any) -> tuple[Execution, list[Execution]]:
    """A system fan-out whose merge failed because two of its (system) children failed."""
    handlers.set_flaky(True)
    publish_system(workspace, "system.child", helpers.FLAKY)
    publish_system(workspace, "system.parent", helpers.fanout_doc("system.child"))
    parent = start_system(workspace, "system.parent", {"items": [{"fail": i in (1, 3), "i": i} for i in range(4)]})
    helpers.run_engine()
    handlers.set_flaky(False)
    assert helpers.refresh(parent).status == "FAILED"
    return parent, list(Execution.objects.filter(parent=parent, status="FAILED").order_by("item_index"))


def _operations(workspace: Any) -> list[tuple[str, str, str, Any]]:
    """(audit action, method, path, body) of every protected operation, with a target each."""
    publish_system(workspace, "system.rollout", helpers.NOOP)
    publish_system(workspace, "system.wait", WAIT)
    running = start_system(workspace, "system.wait", {})
    parent, failed = _failed_system_fanout(workspace)
    return [
        ("workflow.publish", "POST", PUBLISH, helpers.FAIL_IF),
        ("execution.start", "POST", "/api/v1/executions", {"workflow": "system.rollout", "input": {}}),
        ("execution.cancel", "POST", f"/api/v1/executions/{running.pk}/cancel", None),
        ("execution.retry", "POST", f"/api/v1/executions/{failed[0].pk}/retry", None),
        ("step.retry", "POST", f"/api/v1/executions/{failed[1].pk}/steps/t/retry", None),
        ("execution.retry-failed-children", "POST", f"/api/v1/executions/{parent.pk}/children/retry-failed", {}),
    ]


def test_an_admin_token_is_refused_every_protected_operation(workspace: Any) -> None:
    client = api(workspace, "admin")
    for action, method, path, body in _operations(workspace):
        body_ = problem(send(client, method, path, body), 403)
        assert body_["code"] == "reserved-key", (action, body_)
        assert "reserved for system actors" in body_["detail"] and "superusers and admins included" in body_["detail"]
        refusal = last_audit(action)
        assert refusal.outcome == "refused" and "reserved for system actors" in refusal.reason, action
        assert refusal.actor == "token:test-admin"
    assert WorkflowDefinition.objects.get(key="system.rollout").versions.count() == 1
    assert not Execution.objects.filter(workflow__key="system.rollout").exists()
    assert Execution.objects.get(workflow__key="system.wait").status != "CANCELLED"


def test_a_valid_claim_is_accepted_for_every_protected_operation(workspace: Any, deployer: Actor) -> None:
    client = api(workspace, "author")
    for action, method, path, body in _operations(workspace):
        response = signed(client, deployer, method, path, body)
        assert response.status_code in (200, 201), (action, response.content)
        accepted = last_audit(action)
        assert accepted.outcome == "accepted", (action, accepted.reason)
        assert accepted.actor == "actor:deployer via token:test-author"
    assert AuditEvent.objects.filter(action="claim", outcome="accepted").count() == 6
    assert WorkflowDefinition.objects.get(key="system.rollout").versions.count() == 2
    assert Execution.objects.filter(workflow__key="system.rollout").count() == 1
    assert Execution.objects.get(workflow__key="system.wait").status == "CANCELLED"
    assert Execution.objects.filter(workflow__key="system.child", status="FAILED").count() == 0
    helpers.run_engine()
    parent = Execution.objects.get(workflow__key="system.parent")
    assert parent.status == "SUCCEEDED", parent.error


def test_a_reserved_version_cannot_be_started_by_its_hash(workspace: Any) -> None:
    version = publish_system(workspace, "system.rollout", helpers.NOOP)
    response = send(api(workspace, "admin"), "POST", "/api/v1/executions", {"version": version.hash})
    assert problem(response, 403)["code"] == "reserved-key"


def test_an_ordinary_execution_in_a_system_tree_is_protected(workspace: Any) -> None:
    handlers.set_flaky(True)
    doc = helpers.fanout_doc("child")
    doc["vertices"]["fan"]["version"] = helpers.publish(workspace, "child", helpers.FLAKY).hash  # pinned: finding 10
    publish_system(workspace, "system.parent", doc)
    parent = start_system(workspace, "system.parent", {"items": [{"fail": True}]})
    helpers.run_engine()
    handlers.set_flaky(False)
    child = Execution.objects.get(parent=parent)
    assert child.status == "FAILED"
    body = problem(send(api(workspace, "admin"), "POST", f"/api/v1/executions/{child.pk}/retry"), 403)
    assert "'system.parent' is reserved" in body["detail"]


def test_reads_of_reserved_workflows_stay_open(workspace: Any) -> None:
    publish_system(workspace, "system.rollout", helpers.NOOP)
    assert ok(api(workspace, "viewer").get("/api/v1/workflows/system.rollout"))["key"] == "system.rollout"
