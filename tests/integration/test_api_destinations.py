"""Destinations over the API: list, create, read, edit (S11)."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Destination
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

LEDGER = {"name": "ledger", "base_url": "https://ledger.example/api"}


def test_create_then_read_and_list(workspace: Any) -> None:
    client = api(workspace, "operator")
    response = client.post("/api/v1/destinations", {**LEDGER, "concurrency_limit": 4, "timeout_seconds": 2},
                           format="json")
    created = ok(response, 201)
    assert created["name"] == "ledger" and created["concurrency_limit"] == 4 and created["timeout_seconds"] == 2.0
    assert created["rate_per_second"] is None
    assert response["Location"].endswith("/api/v1/destinations/ledger")
    assert ok(client.get("/api/v1/destinations/ledger")) == created
    ok(client.post("/api/v1/destinations", {"name": "archive", "base_url": "http://archive.local"}, format="json"),
       201)
    page = ok(client.get("/api/v1/destinations?limit=1"))
    assert [row["name"] for row in page["results"]] == ["archive"]
    assert [row["name"] for row in ok(client.get(page["next"]))["results"]] == ["ledger"]


def test_a_duplicate_name_is_409(workspace: Any) -> None:
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", LEDGER, format="json"), 201)
    assert problem(client.post("/api/v1/destinations", LEDGER, format="json"), 409)["code"] == "conflict"


@pytest.mark.parametrize(("body", "fields"), [
    ({}, {"name", "base_url"}),
    ({"name": "bad name!", "base_url": "ftp://x"}, {"name", "base_url"}),
    ({**LEDGER, "timeout_seconds": "10"}, {"timeout_seconds"}),
    ({**LEDGER, "timeout_seconds": 0}, {"timeout_seconds"}),
    ({**LEDGER, "timeout_seconds": 4000}, {"timeout_seconds"}),
    ({**LEDGER, "concurrency_limit": -1}, {"concurrency_limit"}),
    ({**LEDGER, "concurrency_limit": 2**40}, {"concurrency_limit"}),
    ({**LEDGER, "concurrency_limit": True}, {"concurrency_limit"}),
    ({**LEDGER, "rate_per_second": 0}, {"rate_per_second"}),
    ({**LEDGER, "base_url": "https://x.example/" + "a" * 600}, {"base_url"}),
    ({**LEDGER, "colour": "blue"}, {"colour"}),
])
def test_invalid_fields_are_400_naming_each(workspace: Any, body: dict[str, Any], fields: set[str]) -> None:
    result = problem(api(workspace, "operator").post("/api/v1/destinations", body, format="json"), 400)
    assert {error.get("field") for error in result["errors"]} == fields, result
    assert not Destination.objects.exists()


def test_patch_changes_limits(workspace: Any) -> None:
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", {**LEDGER, "concurrency_limit": 4}, format="json"), 201)
    changed = ok(client.patch("/api/v1/destinations/ledger", {"concurrency_limit": 1, "timeout_seconds": 3.5},
                              format="json"))
    assert changed["concurrency_limit"] == 1 and changed["timeout_seconds"] == 3.5
    unlimited = ok(client.patch("/api/v1/destinations/ledger", {"concurrency_limit": None}, format="json"))
    assert unlimited["concurrency_limit"] is None
    moved = ok(client.patch("/api/v1/destinations/ledger", {"base_url": "https://ledger-2.example"}, format="json"))
    assert moved["base_url"] == "https://ledger-2.example"
    assert Destination.objects.get().concurrency_limit is None


def test_patch_refuses_renames_and_bad_values(workspace: Any) -> None:
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", LEDGER, format="json"), 201)
    for name in ("other", "ledger"):  # the name is the URL's: not in the body, even unchanged
        rename = problem(client.patch("/api/v1/destinations/ledger", {"name": name}, format="json"), 400)
        assert rename["errors"] == [{"field": "name", "message": "cannot be changed: workflows refer to a "
                                                                 "destination by name (leave it out)"}]
    bad = problem(client.patch("/api/v1/destinations/ledger", {"timeout_seconds": -1, "base_url": 5},
                               format="json"), 400)
    assert {error["field"] for error in bad["errors"]} == {"timeout_seconds", "base_url"}
    problem(client.patch("/api/v1/destinations/ghost", {"concurrency_limit": 1}, format="json"), 404)
    assert Destination.objects.get().base_url == LEDGER["base_url"]


FLOW_FIELDS = {"cooling_until", "concurrency_mode", "concurrency_min", "concurrency_current", "max_cooldown_seconds",
               "max_throttled_waits", "breaker", "breaker_state"}


def test_flow_control_fields_are_shown_with_their_defaults(workspace: Any) -> None:
    client = api(workspace, "operator")
    created = ok(client.post("/api/v1/destinations", LEDGER, format="json"), 201)
    assert set(created) >= FLOW_FIELDS
    assert {name: created[name] for name in FLOW_FIELDS} == {
        "cooling_until": None, "concurrency_mode": "fixed", "concurrency_min": 1, "concurrency_current": None,
        "max_cooldown_seconds": 300.0, "max_throttled_waits": 100, "breaker": None, "breaker_state": "closed"}


def test_adaptive_mode_and_a_breaker_are_set_and_audited(workspace: Any) -> None:
    from workflows.models import AuditEvent

    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", {**LEDGER, "concurrency_limit": 64}, format="json"), 201)
    changed = ok(client.patch("/api/v1/destinations/ledger", {
        "concurrency_mode": "adaptive", "concurrency_min": 4, "max_cooldown_seconds": 60, "max_throttled_waits": 5,
        "breaker": {"failure_ratio": 0.25, "min_calls": 10}}, format="json"))
    assert changed["concurrency_mode"] == "adaptive" and changed["concurrency_current"] == 4, "starts at the floor"
    assert changed["breaker"] == {"failure_ratio": 0.25, "min_calls": 10, "window_seconds": 30.0, "open_seconds": 30.0}
    assert (changed["max_cooldown_seconds"], changed["max_throttled_waits"]) == (60.0, 5)
    audit = AuditEvent.objects.filter(action="destination.update", target="ledger").latest("id")
    assert audit.outcome == "accepted"
    assert audit.detail["fields"] == ["breaker", "concurrency_min", "concurrency_mode", "max_cooldown_seconds",
                                      "max_throttled_waits"]
    back = ok(client.patch("/api/v1/destinations/ledger", {"concurrency_mode": "fixed", "breaker": None},
                           format="json"))
    assert (back["concurrency_current"], back["breaker"], back["breaker_state"]) == (None, None, "closed")


@pytest.mark.parametrize(("body", "field"), [
    ({"concurrency_mode": "turbo"}, "concurrency_mode"),
    ({"concurrency_min": 0}, "concurrency_min"),
    ({"concurrency_min": 1.5}, "concurrency_min"),
    ({"max_cooldown_seconds": 0}, "max_cooldown_seconds"),
    ({"max_cooldown_seconds": "ten"}, "max_cooldown_seconds"),
    ({"max_throttled_waits": -1}, "max_throttled_waits"),
    ({"breaker": {"failure_ratio": 1.5}}, "breaker"),
    ({"breaker": {"min_calls": 0}}, "breaker"),
    ({"breaker": {"open_seconds": -1}}, "breaker"),
    ({"breaker": {"ratio": 0.5}}, "breaker"),
    ({"breaker": [0.5]}, "breaker"),
    ({"concurrency_mode": "adaptive"}, "concurrency_limit"),
    ({"concurrency_mode": "adaptive", "concurrency_limit": 4, "concurrency_min": 5}, "concurrency_min"),
    ({"cooling_until": None}, "cooling_until"),
    ({"concurrency_current": 3}, "concurrency_current"),
    ({"breaker_state": "open"}, "breaker_state"),
])
def test_bad_flow_control_values_are_400_naming_the_field(workspace: Any, body: dict[str, Any], field: str) -> None:
    from workflows.models import AuditEvent

    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", LEDGER, format="json"), 201)
    refused = problem(client.patch("/api/v1/destinations/ledger", body, format="json"), 400)
    assert field in {error["field"] for error in refused["errors"]}, refused
    created = problem(client.post("/api/v1/destinations", {**LEDGER, "name": "other", **body}, format="json"), 400)
    assert field in {error["field"] for error in created["errors"]}, created
    assert not Destination.objects.filter(name="other").exists()
    assert Destination.objects.get(name="ledger").concurrency_mode == "fixed", "nothing half-written"
    if field not in ("cooling_until", "concurrency_current", "breaker_state"):  # those the body's parser refuses
        refusal = AuditEvent.objects.filter(action="destination.update", target="ledger").latest("id")
        assert refusal.outcome == "refused"
