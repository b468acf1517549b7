"""Schedules over the API: create, read, list, pause, change, delete; roles, bad input,
workspaces, reserved workflows, the audit log."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from executions.models import Schedule
from executions.services import schedules
from tests.support import helpers
from tests.support.claims import last_audit, make_actor, publish_system, signed
from tests.support.clients import api, ok, problem
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

NIGHTLY = {"name": "nightly", "workflow": "hello", "cron": "0 2 * * *", "timezone": "Europe/Berlin",
           "input": {"full": True}, "catch_up": True}


@pytest.fixture
def hello(workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)


def test_create_read_list_pause_change_delete(workspace: Any, hello: None) -> None:
    client = api(workspace, "author")
    response = client.post("/api/v1/schedules", NIGHTLY, format="json")
    created = ok(response, 201)
    assert response["Location"].endswith("/api/v1/schedules/nightly")
    assert {k: created[k] for k in NIGHTLY} == NIGHTLY
    assert created["enabled"] is True and created["last_run"] is None and created["last_execution"] is None
    assert created["next_run"].endswith(("T01:00:00Z", "T00:00:00Z"))  # 02:00 in Berlin, in UTC
    assert ok(client.get("/api/v1/schedules/nightly")) == created
    ok(client.post("/api/v1/schedules", {**NIGHTLY, "name": "another"}, format="json"), 201)
    page = ok(client.get("/api/v1/schedules?limit=1"))
    assert [row["name"] for row in page["results"]] == ["another"]
    assert [row["name"] for row in ok(client.get(page["next"]))["results"]] == ["nightly"]

    paused = ok(client.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json"))
    assert paused["enabled"] is False and paused["next_run"] is None
    changed = ok(client.patch("/api/v1/schedules/nightly", {"enabled": True, "cron": "*/5 * * * *",
                                                            "timezone": "UTC", "input": [1], "catch_up": False},
                              format="json"))
    assert changed["cron"] == "*/5 * * * *" and changed["input"] == [1] and changed["catch_up"] is False
    assert changed["next_run"] is not None and changed["next_run"][14:16] in {f"{m:02d}" for m in range(0, 60, 5)}

    assert client.delete("/api/v1/schedules/nightly").status_code == 204
    problem(client.get("/api/v1/schedules/nightly"), 404)
    assert last_audit("schedule.delete").outcome == AuditEvent.Outcome.ACCEPTED


def test_a_fired_schedule_shows_its_last_run(workspace: Any, hello: None) -> None:
    client = api(workspace, "author")
    ok(client.post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    schedule = Schedule.objects.get()
    assert schedules.fire_due(now=schedule.next_run_at) == 1
    shown = ok(client.get("/api/v1/schedules/nightly"))
    assert shown["last_run"] is not None and shown["last_execution"] is not None
    execution = ok(client.get(f"/api/v1/executions/{shown['last_execution']}"))
    assert execution["workflow"] == "hello"


@pytest.mark.parametrize(("body", "fields"), [
    ({}, {"name", "workflow", "cron"}),
    ({**NIGHTLY, "cron": "0 25 * * *"}, {"cron"}),
    ({**NIGHTLY, "cron": "not a cron"}, {"cron"}),
    ({**NIGHTLY, "timezone": "Europe/Atlantis"}, {"timezone"}),
    ({**NIGHTLY, "workflow": "bad key!"}, {"workflow"}),
    ({**NIGHTLY, "name": "a b"}, {"name"}),
    ({**NIGHTLY, "catch_up": 1}, {"catch_up"}),
    ({**NIGHTLY, "enabled": "false"}, {"enabled"}),
    ({**NIGHTLY, "cron": None}, {"cron"}),
    ({**NIGHTLY, "every": "day"}, {"every"}),
])
def test_bad_input_is_400_naming_the_field(workspace: Any, hello: None, body: dict[str, Any], fields: set[str]) -> None:
    result = problem(api(workspace, "author").post("/api/v1/schedules", body, format="json"), 400)
    assert {error.get("field") for error in result["errors"]} == fields, result
    assert not Schedule.objects.exists()


def test_a_duplicate_name_is_409(workspace: Any, hello: None) -> None:
    client = api(workspace, "author")
    ok(client.post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    assert problem(client.post("/api/v1/schedules", NIGHTLY, format="json"), 409)["code"] == "conflict"


def test_patch_refuses_renames_other_workflows_and_bad_values(workspace: Any, hello: None) -> None:
    client = api(workspace, "author")
    ok(client.post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    for body, field in (({"name": "other"}, "name"), ({"workflow": "other"}, "workflow"),
                        ({"name": "nightly"}, "name"), ({"workflow": "hello"}, "workflow"),
                        ({"cron": "* *"}, "cron"), ({"timezone": "Nowhere"}, "timezone")):
        result = problem(client.patch("/api/v1/schedules/nightly", body, format="json"), 400)
        assert [error["field"] for error in result["errors"]] == [field]
    assert ok(client.get("/api/v1/schedules/nightly"))["cron"] == NIGHTLY["cron"]
    problem(client.patch("/api/v1/schedules/missing", {"enabled": False}, format="json"), 404)


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_writes_need_the_author_role(workspace: Any, hello: None, role: str) -> None:
    ok(api(workspace, "author").post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    client = api(workspace, role)
    assert ok(client.get("/api/v1/schedules"))["results"][0]["name"] == "nightly"
    problem(client.post("/api/v1/schedules", {**NIGHTLY, "name": "x"}, format="json"), 403)
    problem(client.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json"), 403)
    problem(client.delete("/api/v1/schedules/nightly"), 403)
    assert Schedule.objects.get().enabled
    assert last_audit("schedule.delete").outcome == AuditEvent.Outcome.REFUSED


def test_the_role_is_checked_before_the_body_is_read(workspace: Any, hello: None) -> None:
    response = api(workspace, "viewer").generic("POST", "/api/v1/schedules", b"x" * (2 * 1024 * 1024),
                                                 content_type="application/json")
    problem(response, 403)
    problem(api(workspace, "author").generic("POST", "/api/v1/schedules", b"x" * (2 * 1024 * 1024),
                                             content_type="application/json"), 413)


def test_another_workspaces_schedules_are_invisible(workspace: Any, other_workspace: Any, hello: None) -> None:
    helpers.publish(other_workspace, "hello", helpers.NOOP)
    ok(api(other_workspace, "author").post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    mine = api(workspace, "admin")
    assert ok(mine.get("/api/v1/schedules"))["results"] == []
    problem(mine.get("/api/v1/schedules/nightly"), 404)
    problem(mine.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json"), 404)
    problem(mine.delete("/api/v1/schedules/nightly"), 404)
    assert Schedule.objects.get().enabled
    # The same name is free here, and only another workspace's workflow is refused.
    ok(mine.post("/api/v1/schedules", NIGHTLY, format="json"), 201)
    helpers.publish(other_workspace, "theirs", helpers.NOOP)
    result = problem(mine.post("/api/v1/schedules", {**NIGHTLY, "name": "x", "workflow": "theirs"}, format="json"),
                     404)
    assert result["errors"][0]["field"] == "workflow"


def test_a_reserved_workflow_needs_a_verified_system_actor(workspace: Any) -> None:
    publish_system(workspace, "system.nightly", helpers.NOOP)
    body = {**NIGHTLY, "workflow": "system.nightly"}
    assert problem(api(workspace, "admin").post("/api/v1/schedules", body, format="json"), 403)["code"] == \
        "reserved-key"
    deployer = make_actor("deployer", ("system.*",))
    client = api(workspace, "author")
    created = ok(signed(client, deployer, "POST", "/api/v1/schedules", body), 201)
    assert created["workflow"] == "system.nightly"
    assert Schedule.objects.get().system_actor == "deployer"
    assert problem(client.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json"), 403)["code"] == \
        "reserved-key"
    assert problem(client.delete("/api/v1/schedules/nightly"), 403)["code"] == "reserved-key"
    ok(signed(client, deployer, "PATCH", "/api/v1/schedules/nightly", {"enabled": False}))
    assert signed(client, deployer, "DELETE", "/api/v1/schedules/nightly").status_code == 204


def test_anonymous_requests_are_refused(workspace: Any) -> None:
    problem(APIClient().get("/api/v1/schedules"), 401)
    problem(APIClient().post("/api/v1/schedules", NIGHTLY, format="json"), 401)
