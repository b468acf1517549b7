"""Starting executions (idempotently) and reading them: lists and filters, detail, children
and events, with keyset pagination."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F

from executions.models import Execution
from tests.support import factories, helpers
from tests.support.clients import api, ok, problem
from tests.support.threads import race

pytestmark = pytest.mark.django_db


# --- starting -----------------------------------------------------------------------------------

def test_start_returns_201_with_the_execution_and_its_location(workspace: Any) -> None:
    version = helpers.publish(workspace, "flow", helpers.NOOP)
    response = api(workspace, "operator").post("/api/v1/executions", {"workflow": "flow", "input": {"a": 1}},
                                               format="json")
    body = ok(response, 201)
    assert body["status"] == "PENDING" and body["workflow"] == "flow" and body["version"] == version.hash
    assert body["parent"] is None and body["root"] == body["id"] and body["item_index"] is None
    assert body["attempt"] == 1 and body["counts"] is None and body["created_by"] == "token:test-operator"
    assert response["Location"].endswith(f"/api/v1/executions/{body['id']}")


def test_start_can_pin_a_version_and_defaults_input_to_an_object(workspace: Any) -> None:
    old = helpers.publish(workspace, "flow", helpers.NOOP).hash
    helpers.publish(workspace, "flow", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}})
    client = api(workspace, "operator")
    pinned = ok(client.post("/api/v1/executions", {"workflow": "flow", "version": old}, format="json"), 201)
    assert pinned["version"] == old
    by_hash_only = ok(client.post("/api/v1/executions", {"version": old}, format="json"), 201)
    assert by_hash_only["workflow"] == "flow"
    detail = ok(client.get(f"/api/v1/executions/{pinned['id']}"))
    assert detail["input"] == {}


@pytest.mark.parametrize(("body", "field"), [
    ({}, "workflow"),
    ({"workflow": 7}, "workflow"),
    ({"workflow": "flow", "version": "abc"}, "version"),
    ({"workflow": "flow", "inputs": {}}, "inputs"),
    ({"workflow": "has space"}, "workflow"),
])
def test_a_malformed_start_is_400_naming_the_field(workspace: Any, body: dict[str, Any], field: str) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    result = problem(api(workspace, "operator").post("/api/v1/executions", body, format="json"), 400)
    assert field in [error.get("field") for error in result["errors"]], result
    assert not Execution.objects.exists()


def test_an_unknown_workflow_or_version_is_404(workspace: Any) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    client = api(workspace, "operator")
    problem(client.post("/api/v1/executions", {"workflow": "ghost"}, format="json"), 404)
    problem(client.post("/api/v1/executions", {"workflow": "flow", "version": "f" * 64}, format="json"), 404)


def test_the_same_idempotency_key_and_body_return_the_same_execution(workspace: Any) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    client = api(workspace, "operator")
    request = {"workflow": "flow", "input": {"order": 42}}
    first = ok(client.post("/api/v1/executions", request, format="json", HTTP_IDEMPOTENCY_KEY="order-42"), 201)
    again = ok(client.post("/api/v1/executions", request, format="json", HTTP_IDEMPOTENCY_KEY="order-42"), 200)
    assert again["id"] == first["id"] and again["idempotency_key"] == "order-42"
    assert Execution.objects.count() == 1


def test_the_same_idempotency_key_with_another_body_is_409(workspace: Any) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    client = api(workspace, "operator")
    ok(client.post("/api/v1/executions", {"workflow": "flow", "input": {"order": 42}}, format="json",
                   HTTP_IDEMPOTENCY_KEY="order-42"), 201)
    conflict = problem(client.post("/api/v1/executions", {"workflow": "flow", "input": {"order": 43}},
                                   format="json", HTTP_IDEMPOTENCY_KEY="order-42"), 409)
    assert conflict["code"] == "conflict" and "order-42" in conflict["detail"]
    assert Execution.objects.count() == 1


@pytest.mark.parametrize("key", ["", " padded ", "x" * 256, "tab\there"])
def test_a_malformed_idempotency_key_is_400(workspace: Any, key: str) -> None:
    helpers.publish(workspace, "flow", helpers.NOOP)
    response = api(workspace, "operator").post("/api/v1/executions", {"workflow": "flow"}, format="json",
                                               HTTP_IDEMPOTENCY_KEY=key)
    assert problem(response, 400)["errors"][0]["field"] == "Idempotency-Key"
    assert not Execution.objects.exists()


def test_a_schedules_key_cannot_be_used_to_swallow_its_fire(workspace: Any) -> None:
    """A start keyed like a schedule's fire made the schedule start nothing at that time."""
    helpers.publish(workspace, "flow", helpers.NOOP)
    key = "schedule:nightly:2026-12-03T02:00:00Z"
    response = api(workspace, "operator").post("/api/v1/executions", {"workflow": "flow"}, format="json",
                                               HTTP_IDEMPOTENCY_KEY=key)
    refused = problem(response, 400)
    assert refused["errors"][0]["field"] == "Idempotency-Key" and "reserved for schedules" in refused["detail"]
    assert not Execution.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_concurrent_idempotent_starts_create_one_execution() -> None:
    workspace = factories.default_workspace()
    helpers.publish(workspace, "flow", helpers.NOOP)
    client_count = 8
    clients = [api(workspace, "operator", name=f"racer-{n}") for n in range(client_count)]

    def start(client: Any) -> tuple[int, str]:
        response = client.post("/api/v1/executions", {"workflow": "flow", "input": {"n": 1}}, format="json",
                               HTTP_IDEMPOTENCY_KEY="race")
        return response.status_code, response.json()["id"]

    results = race(*[functools.partial(start, client) for client in clients], timeout=30)
    assert len(results) == client_count
    assert sorted(status for status, _ in results) == [200] * (client_count - 1) + [201]
    assert len({execution_id for _, execution_id in results}) == 1
    assert Execution.objects.filter(idempotency_key="race").count() == 1


# --- reading ------------------------------------------------------------------------------------

def test_a_fanout_shows_counts_merge_state_steps_and_timings(workspace: Any) -> None:
    parent = str(helpers.run_fanout(workspace, 10, failing=(2, 5)).pk)
    detail = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "FAILED"
    assert detail["counts"] == {"PENDING": 0, "RUNNING": 0, "SUCCEEDED": 8, "FAILED": 2, "CANCELLED": 0,
                                "NEVER_STARTED": 0}
    [fanout] = detail["fanouts"]
    assert fanout["spawner_vertex"] == "fan" and fanout["merge_vertex"] == "join" and fanout["total"] == 10
    assert fanout["counts"] == detail["counts"] and fanout["spawn_complete"] is True
    assert "2 failed" in fanout["merge_state"]
    assert [(step["vertex"], step["status"]) for step in detail["steps"]] == [("fan", "SUCCEEDED"),
                                                                              ("join", "FAILED")]
    assert detail["started_at"] and detail["finished_at"] and detail["duration_seconds"] is not None
    assert detail["input"]["items"][2] == {"fail": True, "i": 2}
    assert detail["lineage"] == []


def test_a_child_shows_its_lineage_input_and_output(workspace: Any) -> None:
    parent = str(helpers.run_fanout(workspace, 3).pk)
    client = api(workspace, "viewer")
    child = ok(client.get(f"/api/v1/executions/{parent}/children"))["results"][1]
    assert child["parent"] == parent and child["root"] == parent
    assert child["spawn_vertex"] == "fan" and child["item_index"] == 1
    detail = ok(client.get(f"/api/v1/executions/{child['id']}"))
    assert [ancestor["id"] for ancestor in detail["lineage"]] == [parent]
    assert detail["lineage"][0]["workflow"] == "parent"
    assert detail["input"] == {"fail": False, "i": 1}
    assert detail["status"] == "SUCCEEDED" and detail["counts"] is None


def test_children_come_in_item_order_and_filter_by_status(workspace: Any) -> None:
    parent = str(helpers.run_fanout(workspace, 25, failing=(3, 11, 19, 20)).pk)
    client = api(workspace, "viewer")
    seen, url = [], f"/api/v1/executions/{parent}/children?limit=7"
    while url:
        page = ok(client.get(url))
        assert len(page["results"]) <= 7
        seen += [child["item_index"] for child in page["results"]]
        url = page["next"]
    assert seen == list(range(25))
    failed = ok(client.get(f"/api/v1/executions/{parent}/children?status=FAILED&limit=3"))
    assert [child["item_index"] for child in failed["results"]] == [3, 11, 19]
    assert "status=FAILED" in failed["next"]
    rest = ok(client.get(failed["next"]))
    assert [child["item_index"] for child in rest["results"]] == [20] and rest["next"] is None
    assert ok(client.get(f"/api/v1/executions/{parent}/children?spawner=other"))["results"] == []


def test_the_execution_list_filters_and_pages_newest_first(workspace: Any) -> None:
    parent = str(helpers.run_fanout(workspace, 12, failing=(0,)).pk)
    helpers.publish(workspace, "flow", helpers.NOOP)
    lone = str(helpers.start(workspace, "flow", {}).pk)
    client = api(workspace, "viewer")
    seen, url = [], "/api/v1/executions?limit=5"
    while url:
        page = ok(client.get(url))
        seen += [row["id"] for row in page["results"]]
        url = page["next"]
    # Everything here shares one created_at (one transaction): ties must not repeat or vanish.
    assert len(seen) == len(set(seen)) == 14
    assert seen == [str(pk) for pk in Execution.objects.order_by("-created_at", "-id").values_list("pk", flat=True)]
    top = {row["id"]: row for row in ok(client.get("/api/v1/executions?top_level=true"))["results"]}
    assert set(top) == {lone, parent}
    assert top[parent]["counts"]["FAILED"] == 1 and top[lone]["counts"] is None  # counts on list rows too
    children = ok(client.get(f"/api/v1/executions?parent={parent}&limit=100"))["results"]
    assert len(children) == 12
    assert len(ok(client.get("/api/v1/executions?top_level=false"))["results"]) == 12
    failed = ok(client.get("/api/v1/executions?status=FAILED&top_level=false"))["results"]
    assert [row["item_index"] for row in failed] == [0]
    assert [row["id"] for row in ok(client.get("/api/v1/executions?workflow=flow"))["results"]] == [lone]
    Execution.objects.filter(pk=lone).update(created_at=F("created_at") + timedelta(seconds=1))
    newest = ok(client.get("/api/v1/executions?limit=1"))
    assert newest["results"][0]["id"] == lone and ok(client.get(newest["next"]))["results"][0]["id"] != lone


def test_events_are_paged_oldest_first(workspace: Any) -> None:
    parent = str(helpers.run_fanout(workspace, 2).pk)
    client = api(workspace, "viewer")
    ids, url = [], f"/api/v1/executions/{parent}/events?limit=2"
    while url:
        page = ok(client.get(url))
        ids += [event["id"] for event in page["results"]]
        url = page["next"]
    assert ids == sorted(ids) and len(ids) >= 4
    first = ok(client.get(f"/api/v1/executions/{parent}/events"))["results"][0]
    assert first["to_status"] and first["created_at"]


@pytest.mark.parametrize("query", ["cursor=garbage", "cursor=WyJhIl0", "limit=0", "limit=1001", "limit=x",
                                   "status=BOGUS", "parent=not-a-uuid", "top_level=maybe", "workflow=a%00b",
                                   "cursor=%00"])
def test_bad_list_parameters_are_400_naming_them(workspace: Any, query: str) -> None:
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions?{query}"), 400)
    assert body["errors"][0]["field"] == query.split("=")[0]


@pytest.mark.parametrize("cursor", ["WyJmYW4iLCAiMyJd", "WyJmYW4iLCAxMDAwMDAwMDAwMDAwXQ", "WzFd"])
def test_a_forged_children_cursor_is_400(workspace: Any, cursor: str) -> None:
    parent = str(helpers.run_fanout(workspace, 1).pk)
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions/{parent}/children?cursor={cursor}"), 400)
    assert body["errors"][0]["field"] == "cursor"


def test_unknown_executions_are_404(workspace: Any) -> None:
    client = api(workspace, "viewer")
    for suffix in ("", "/children", "/events"):
        problem(client.get(f"/api/v1/executions/00000000-0000-4000-8000-000000000000{suffix}"), 404)
        problem(client.get(f"/api/v1/executions/not-a-uuid{suffix}"), 404)
