"""One home for destination rules (executions/destinations/rules.py): the API and the UI refuse
the same bad input with the same message, field by field, and write nothing."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.urls import reverse

from executions.models import Destination
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
GOOD = {"name": "billing", "base_url": "https://billing.example/api"}

# (field, the value an API client sends, the text a UI user types)
BAD: list[tuple[str, Any, str]] = [
    ("name", "bad name!", "bad name!"),
    ("name", "-leading-dash", "-leading-dash"),
    ("name", "n" * 101, "n" * 101),
    ("name", "", ""),
    ("base_url", "", ""),
    ("base_url", "ftp://billing.example", "ftp://billing.example"),
    ("base_url", "billing.example", "billing.example"),
    ("base_url", "https://billing.example/" + "a" * 500, "https://billing.example/" + "a" * 500),
    ("base_url", "https://user:secret@billing.example", "https://user:secret@billing.example"),
    ("base_url", "https://billing.example/api?key=secret", "https://billing.example/api?key=secret"),
    ("base_url", "https://billing.example/api#", "https://billing.example/api#"),
    ("base_url", "https://billing.example/api#frag", "https://billing.example/api#frag"),
    ("base_url", "http://169.254.169.254/latest", "http://169.254.169.254/latest"),
    ("base_url", "http://10.0.0.1:8080", "http://10.0.0.1:8080"),
    ("base_url", "http://[::ffff:192.168.1.1]/", "http://[::ffff:192.168.1.1]/"),
    ("base_url", "http://[fe80::1]/", "http://[fe80::1]/"),
    ("base_url", "http://0.0.0.0/", "http://0.0.0.0/"),
    ("base_url", "http://224.0.0.1/", "http://224.0.0.1/"),
    ("timeout_seconds", "soon", "soon"),
    ("timeout_seconds", 0, "0"),
    ("timeout_seconds", -1, "-1"),
    ("timeout_seconds", 3601, "3601"),
    ("concurrency_limit", -1, "-1"),
    ("concurrency_limit", 2.5, "2.5"),
    ("concurrency_limit", 1_000_001, "1000001"),
    ("concurrency_limit", "ten", "ten"),
    ("concurrency_limit", "٣", "٣"),  # a digit, but not an ASCII one
    ("rate_per_second", 0, "0"),
    ("rate_per_second", 2_000_000, "2000000"),
    ("rate_per_second", "fast", "fast"),
    ("max_response_bytes", 0, "0"),
    ("max_response_bytes", 1.5, "1.5"),
    ("max_response_bytes", 2**40, str(2**40)),
    ("max_response_bytes", "10MB", "10MB"),
]


@pytest.mark.parametrize(("field", "value", "text"), BAD, ids=[f"{f}={t[:30]!r}" for f, _, t in BAD])
def test_the_api_and_the_ui_refuse_the_same_input_with_the_same_message(workspace, operator, field, value, text):
    from_api = problem(api(workspace, "operator").post("/api/v1/destinations", {**GOOD, field: value},
                                                       format="json"), 400)
    [error] = from_api["errors"]
    assert error["field"] == field
    message = error["message"]

    response = operator.post("/rate-limits/new", {**GOOD, field: text}, **HTMX)
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert f"{field}: {message}" in page  # the summary
    assert f'<span class="field-error">{message}</span>' in page  # next to the input
    assert not Destination.objects.exists()


@pytest.mark.parametrize(("value", "text"), [(-1, "-1"), (2.5, "2.5"), ("ten", "ten"), (10**7, "10000000")])
def test_a_limit_edit_is_refused_alike_over_the_api_and_inline(workspace, operator, value, text):
    destination = Destination.objects.create(workspace=workspace, name="billing", base_url=GOOD["base_url"])
    refused = problem(api(workspace, "operator").patch("/api/v1/destinations/billing",
                                                       {"concurrency_limit": value}, format="json"), 400)
    [error] = refused["errors"]
    response = operator.post(reverse("ui:destination-limit", args=[destination.pk]),
                             {"concurrency_limit": text}, **HTMX)
    assert response.status_code == 400
    assert f"concurrency_limit: {error['message']}" in html.unescape(response.content.decode())
    assert Destination.objects.get().concurrency_limit is None


def test_the_new_fields_are_accepted_alike(workspace, operator):
    fields = {"timeout_seconds": 2.5, "concurrency_limit": 3, "rate_per_second": 0.5, "max_response_bytes": 4096}
    created = ok(api(workspace, "operator").post("/api/v1/destinations", {**GOOD, **fields}, format="json"), 201)
    assert {name: created[name] for name in fields} == fields
    response = operator.post("/rate-limits/new", {**GOOD, "name": "ui-made", **{k: str(v) for k, v in
                                                                                fields.items()}}, **HTMX)
    assert response.status_code == 200
    made = Destination.objects.get(name="ui-made")
    assert (made.timeout_seconds, made.concurrency_limit, made.rate_per_second, made.max_response_bytes) == \
        (2.5, 3, 0.5, 4096)
    defaults = ok(api(workspace, "operator").post("/api/v1/destinations", {**GOOD, "name": "plain"},
                                                  format="json"), 201)
    assert (defaults["timeout_seconds"], defaults["max_response_bytes"]) == (10.0, 10 * 1024 * 1024)


def test_loopback_outside_the_allow_list_is_refused(workspace, settings):
    settings.SB = {**settings.SB, "OUTBOUND_ALLOW": "127.0.0.1/32"}
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", {"name": "one", "base_url": "http://127.0.0.1:9"}, format="json"), 201)
    refused = problem(client.post("/api/v1/destinations", {"name": "two", "base_url": "http://127.0.0.2:9"},
                                  format="json"), 400)
    assert refused["errors"] == [{"field": "base_url", "message": "cannot be called: 127.0.0.2 is a loopback "
                                  "address (outbound calls reach public addresses only unless "
                                  "SB_OUTBOUND_ALLOW opens it)"}]
