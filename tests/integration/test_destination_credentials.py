"""Destination credentials (issue 15, finding 8): sealed at rest, never read back, injected at
call time, and redacted from step errors, events and the call log."""

from __future__ import annotations

import base64
import html
import json
from typing import Any

import pytest
from django.db import connection

from executions.models import Destination, DestinationCall, Event
from tests.support import helpers
from tests.support.clients import api, client_for, ok, problem
from tests.support.httpserver import serve

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
TOKEN = "tok-9f8e7d6c5b4a-SECRET"
BASIC = {"username": "svc-ledger", "password": "p4ss w0rd-SECRET"}
KEY = "key-0123456789-SECRET"


def stored_row(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(d)::text FROM executions_destination d WHERE name = %s", [name])
        return cursor.fetchone()[0]


@pytest.mark.parametrize(("credentials", "kind"), [
    ({"bearer": TOKEN}, "bearer"),
    ({"basic": BASIC}, "basic"),
    ({"headers": {"X-Api-Key": KEY}}, "headers"),
])
def test_credentials_are_sealed_and_never_read_back(workspace, credentials, kind):
    client = api(workspace, "operator")
    created = ok(client.post("/api/v1/destinations", {"name": "ledger", "base_url": "https://ledger.example",
                                                      "credentials": credentials}, format="json"), 201)
    assert created["credentials"] == {"set": True, "kind": kind}
    assert ok(client.get("/api/v1/destinations/ledger"))["credentials"] == {"set": True, "kind": kind}
    listed = json.dumps(ok(client.get("/api/v1/destinations")))
    row = stored_row("ledger")
    for secret in (TOKEN, BASIC["password"], KEY):
        assert secret not in listed and secret not in row  # not in the API, not in plain text at rest
    assert json.loads(row)["credentials_sealed"].startswith("gAAAAA")  # a Fernet token
    cleared = ok(client.patch("/api/v1/destinations/ledger", {"credentials": None}, format="json"))
    assert cleared["credentials"] is None and json.loads(stored_row("ledger"))["credentials_sealed"] == ""


def test_a_destination_without_credentials_reads_null(workspace):
    created = ok(api(workspace, "operator").post("/api/v1/destinations", {"name": "open", "base_url":
                                                                          "https://open.example"}, format="json"), 201)
    assert created["credentials"] is None


@pytest.mark.parametrize("credentials", [
    "token", {"bearer": ""}, {"bearer": "has space"}, {"bearer": 5}, {"oauth": "x"},
    {"bearer": TOKEN, "basic": BASIC}, {"basic": {"username": "a:b", "password": "x"}},
    {"basic": {"username": "a"}}, {"headers": {}}, {"headers": {"Bad Name": "x"}},
    {"headers": {"Host": "evil.example"}}, {"headers": {"X-Api-Key": "a\r\nX-Injected: 1"}},
])
def test_bad_credentials_are_refused_alike_over_the_api_and_the_ui(workspace, operator, credentials):
    refused = problem(api(workspace, "operator").post("/api/v1/destinations", {
        "name": "ledger", "base_url": "https://ledger.example", "credentials": credentials}, format="json"), 400)
    [error] = refused["errors"]
    assert error["field"] == "credentials"
    assert TOKEN not in json.dumps(refused)
    if isinstance(credentials, dict) and len(credentials) == 1 and isinstance(next(iter(credentials.values())),
                                                                              str | dict):
        kind, secret = next(iter(credentials.items()))
        form = {"credentials_kind": kind}
        if kind == "bearer":
            form["credentials_token"] = secret
        elif kind == "basic":
            form.update(credentials_username=secret.get("username", ""), credentials_password=secret.get("password",
                                                                                                          ""))
        elif kind == "headers" and len(secret) == 1:
            [(name, value)] = secret.items()
            form.update(credentials_header=name, credentials_value=value)
        else:
            form = {}
        if form and not (kind == "basic" and "password" not in secret):
            response = operator.post("/rate-limits/new", {"name": "ledger", "base_url": "https://ledger.example",
                                                          **form}, **HTMX)
            assert response.status_code == 400
            assert f"credentials: {error['message']}" in html.unescape(response.content.decode())
    assert not Destination.objects.exists()


def test_without_a_key_credentials_cannot_be_stored(workspace, settings):
    settings.SB = {**settings.SB, "CREDENTIALS_KEY": ""}
    refused = problem(api(workspace, "operator").post("/api/v1/destinations", {
        "name": "ledger", "base_url": "https://ledger.example", "credentials": {"bearer": TOKEN}}, format="json"), 400)
    assert refused["errors"] == [{"field": "credentials",
                                  "message": "cannot be stored: SB_CREDENTIALS_KEY is not set on this server"}]


def test_the_ui_form_stores_credentials_the_same_way(workspace, operator):
    response = operator.post("/rate-limits/new", {"name": "ledger", "base_url": "https://ledger.example",
                                                  "credentials_kind": "basic", **{f"credentials_{k}": v for k, v in
                                                                                  BASIC.items()}}, **HTMX)
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "credentials: basic" in page and BASIC["password"] not in page
    assert ok(api(workspace, "viewer").get("/api/v1/destinations/ledger"))["credentials"] == \
        {"set": True, "kind": "basic"}


def call(workspace: Any, url: str, path: str, credentials: dict[str, Any], headers: dict[str, str] | None = None):
    ok(api(workspace, "operator").post("/api/v1/destinations", {"name": "api", "base_url": url,
                                                                "credentials": credentials}, format="json"), 201)
    helpers.publish(workspace, "call", {"start": "call", "vertices": {"call": {
        "type": "HTTP", "destination": "api", "method": "GET", "path": path, "headers": headers or {}}}})
    execution = helpers.start(workspace, "call", {})
    helpers.run_engine()
    return execution


@pytest.mark.parametrize(("credentials", "header", "value"), [
    ({"bearer": TOKEN}, "Authorization", f"Bearer {TOKEN}"),
    ({"basic": BASIC}, "Authorization",
     "Basic " + base64.b64encode(f"{BASIC['username']}:{BASIC['password']}".encode()).decode()),
    ({"headers": {"X-Api-Key": KEY}}, "X-Api-Key", KEY),
])
def test_credentials_are_injected_at_call_time(workspace, credentials, header, value):
    with serve() as (url, recorder):
        execution = call(workspace, url, "/ok", credentials, headers={header.lower(): "from-the-dsl"})
    assert helpers.refresh(execution).status == "SUCCEEDED"
    [request] = recorder.requests
    assert request["headers"][header] == value  # the destination's, not the DSL's
    assert "from-the-dsl" not in json.dumps(request["headers"])


@pytest.mark.parametrize("credentials", [{"bearer": TOKEN}, {"basic": BASIC}, {"headers": {"X-Api-Key": KEY}}])
def test_a_server_quoting_the_secret_back_does_not_leak_it(workspace, credentials):
    with serve() as (url, _):
        execution = call(workspace, url, "/echo-headers/400", credentials)
    step = helpers.step(execution, "call")
    texts = [step.error, helpers.refresh(execution).error, DestinationCall.objects.get().error,
             *Event.objects.filter(execution=execution).values_list("message", flat=True)]
    assert "returned HTTP 400" in step.error
    for text in texts:
        for secret in (TOKEN, BASIC["password"], KEY, base64.b64encode(b"svc-ledger:p4ss").decode()[:12]):
            assert secret not in text, text
    assert "[redacted]" in step.error and "[redacted]" in DestinationCall.objects.get().error


def test_a_secret_the_server_quotes_json_escaped_is_redacted(workspace):
    """A secret with '"' or '\\' comes back JSON-escaped: that form went through unredacted."""
    secret = 'tok-"quoted"\\back/slash-SECRET'
    with serve() as (url, _):
        execution = call(workspace, url, "/echo-headers/400", {"bearer": secret})
    escaped = json.dumps(secret)[1:-1]
    for text in (helpers.step(execution, "call").error, DestinationCall.objects.get().error):
        assert escaped not in text and secret not in text and "quoted" not in text, text
        assert "[redacted]" in text


@pytest.mark.parametrize("pad", [60, 75, 90, 100])
def test_the_error_excerpt_is_redacted_before_it_is_cut(workspace, pad):
    """The 120-character excerpt was cut first: a secret across the cut showed its start."""
    with serve() as (url, _):
        execution = call(workspace, url, f"/echo-headers/400/{pad}", {"bearer": TOKEN})
    for text in (helpers.step(execution, "call").error, DestinationCall.objects.get().error):
        assert TOKEN[:6] not in text, text


def test_a_new_origin_needs_the_credentials_again_and_is_audited(workspace):
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", {"name": "ledger", "base_url": "https://ledger.example/v1",
                                            "credentials": {"bearer": TOKEN}}, format="json"), 201)
    for elsewhere in ("https://attacker.example/v1", "http://ledger.example/v1", "https://ledger.example:8443/v1"):
        refused = problem(client.patch("/api/v1/destinations/ledger", {"base_url": elsewhere}, format="json"), 400)
        assert refused["errors"][0]["field"] == "base_url" and "credentials" in refused["errors"][0]["message"]
    assert Destination.objects.get().base_url == "https://ledger.example/v1"
    # The same origin (a new path, the default port spelled out) keeps them.
    moved = ok(client.patch("/api/v1/destinations/ledger", {"base_url": "https://ledger.example:443/v2"},
                            format="json"))
    assert moved["credentials"] == {"set": True, "kind": "bearer"}
    replaced = ok(client.patch("/api/v1/destinations/ledger", {"base_url": "https://new.example",
                                                               "credentials": {"bearer": "tok-new-SECRET"}},
                               format="json"))
    assert replaced["base_url"] == "https://new.example" and replaced["credentials"]["set"] is True
    from workflows.models import AuditEvent

    audit = AuditEvent.objects.filter(action="destination.update", outcome="accepted").order_by("-id").first()
    assert audit.detail == {"origin_from": "https://ledger.example:443", "origin_to": "https://new.example:443",
                            "credentials": "replaced", "fields": ["base_url", "credentials"]}
    cleared = ok(client.patch("/api/v1/destinations/ledger", {"base_url": "https://other.example",
                                                              "credentials": None}, format="json"))
    assert cleared["credentials"] is None


def test_credentials_the_key_cannot_open_are_not_shown_as_set(workspace, settings):
    ok(api(workspace, "operator").post("/api/v1/destinations", {
        "name": "ledger", "base_url": "https://ledger.example", "credentials": {"bearer": TOKEN}}, format="json"), 201)
    from cryptography.fernet import Fernet

    settings.SB = {**settings.SB, "CREDENTIALS_KEY": Fernet.generate_key().decode()}  # the old key is gone
    read = ok(api(workspace, "viewer").get("/api/v1/destinations/ledger"))["credentials"]
    assert read["set"] is False and read["kind"] == "bearer" and "cannot be opened" in read["error"]
    page = html.unescape(client_for(workspace, "viewer").get("/rate-limits/").content.decode())
    assert "credentials: bearer" in page and "(cannot be opened: set them again)" in page
