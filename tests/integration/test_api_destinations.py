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
