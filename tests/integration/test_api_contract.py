"""What the OpenAPI schema promises, the API does (issue 28 §5): any cursor of a list's pattern
is a position, fields that cannot change are refused by name, null where the schema allows it,
the cron grammar and time zones the schema states, an unknown workflow is a 404."""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executions.destinations import rules
from executions.models import Schedule
from executions.services import cron, schedules
from tests.support import helpers
from tests.support.clients import api, ok, problem
from workflows.errors import Invalid

pytestmark = pytest.mark.django_db

NIGHTLY = {"name": "nightly", "workflow": "hello", "cron": "0 2 * * *"}


@pytest.fixture
def hello(workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)


def test_a_schedule_whose_input_is_null_can_be_changed(workspace: Any, hello: None) -> None:
    client = api(workspace, "author")
    assert ok(client.post("/api/v1/schedules", {**NIGHTLY, "input": None}, format="json"), 201)["input"] is None
    assert ok(client.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json"))["input"] is None
    assert ok(client.patch("/api/v1/schedules/nightly", {}, format="json"))["enabled"] is False
    ok(client.patch("/api/v1/schedules/nightly", {"input": [1]}, format="json"))
    assert ok(client.patch("/api/v1/schedules/nightly", {"input": None}, format="json"))["input"] is None
    assert Schedule.objects.get().input is None


# --- cursors: every string of a list's pattern is a position -----------------------------------

def test_any_cursor_of_the_pattern_is_a_position_in_every_list(workspace: Any, hello: None) -> None:
    parent = str(helpers.run_fanout(workspace, 3).pk)
    client = api(workspace, "viewer")
    for path, past_the_end, before_all in (
            ("/api/v1/workflows", "zzz", "0"),
            ("/api/v1/destinations", "zzz", "0"),
            ("/api/v1/schedules", "zzz", "0"),
            ("/api/v1/executions", "0_" + "0" * 32, "9999999999999999_" + "f" * 32),
            (f"/api/v1/executions/{parent}/children", "fan.9999999999", "A.0"),
            (f"/api/v1/executions/{parent}/events", "9" * 19, "0"),
            (f"/api/v1/executions/{parent}/steps/join/output", "9" * 10, "0")):
        assert ok(client.get(f"{path}?cursor={past_the_end}"))["results"] == [], path
        after = ok(client.get(f"{path}?cursor={before_all}"))
        assert after["results"] == ok(client.get(path))["results"][int(path.endswith("/output")):], path


@pytest.mark.parametrize("cursor", ["", "a%20b", "WyJhIl0", "fan.1", "1_abc", "-1", "a" * 129])
def test_a_cursor_outside_the_pattern_is_400_naming_it(workspace: Any, hello: None, cursor: str) -> None:
    parent = str(helpers.run_fanout(workspace, 1).pk)
    client = api(workspace, "viewer")
    for path in ("/api/v1/executions", f"/api/v1/executions/{parent}/events"):
        body = problem(client.get(f"{path}?cursor={cursor}"), 400)
        assert body["errors"][0]["field"] == "cursor", (path, body)


# --- schedules ---------------------------------------------------------------------------------

def test_a_schedule_of_an_unknown_workflow_is_404_naming_it(workspace: Any) -> None:
    body = problem(api(workspace, "author").post("/api/v1/schedules", {**NIGHTLY, "workflow": "nope"},
                                                  format="json"), 404)
    assert body["errors"] == [{"field": "workflow", "message": "no workflow 'nope' in this workspace"}]
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(("cron", "says"), [
    ("5-5 * * * *", "holds one value: minute 5-5 (write 5)"),  # croniter 7 fires it every minute
    ("0 0 * * sat-sat", "holds one value"),
    ("0 0 L * *", "the day-of-month field 'L' is not '*', a value 1-31, a range"),
    ("0 0 * * 1#2", "the day-of-week field '1#2' is not '*', a value 0-7 (or sun-sat)"),
    ("0 0 ? * *", "the day-of-month field '?'"),
    ("*/0 * * * *", "the minute field '*/0'"),
    ("0 2 * * *\n", "must be a cron expression: five fields"),
])
def test_a_cron_outside_the_grammar_is_400_naming_it(workspace: Any, hello: None, cron: str, says: str) -> None:
    body = problem(api(workspace, "author").post("/api/v1/schedules", {**NIGHTLY, "cron": cron}, format="json"), 400)
    assert [error["field"] for error in body["errors"]] == ["cron"] and says in body["errors"][0]["message"], body


@pytest.mark.parametrize("cron", ["0 2 * JAN-mar sun-sat", "00 05 * * 7", "@Hourly", "*/15\t* * * *",
                                  "0-30/10 1,2,3-5 1-31 1-12 0-7", " 0 2 * * * "])
def test_the_grammar_takes_names_any_case_sunday_as_7_and_tabs(workspace: Any, hello: None, cron: str) -> None:
    ok(api(workspace, "author").post("/api/v1/schedules", {**NIGHTLY, "cron": cron}, format="json"), 201)


# --- the schema's patterns are what the rules accept ---------------------------------------------

@given(st.from_regex(cron.GRAMMAR, fullmatch=True).filter(lambda text: len(text) <= schedules.MAX_CRON))
@settings(max_examples=150, deadline=None, database=None)
def test_every_cron_of_the_schemas_pattern_is_accepted(text: str) -> None:
    try:
        schedules.validated({"cron": text})
    except Invalid as error:  # a day that no month in the list has (30 2): the grammar cannot know
        assert "failed to find next date" in str(error), (text, error)


@given(st.from_regex(re.compile(rules.BASE_URL_PATTERN), fullmatch=True).filter(lambda url: len(url) <= rules.MAX_URL))
@settings(max_examples=100, deadline=None, database=None)
def test_every_base_url_of_the_schemas_pattern_is_accepted(url: str) -> None:
    assert rules.validated({"base_url": url}) == {"base_url": url}


def test_the_time_zone_pattern_names_exactly_the_zones_accepted() -> None:
    pattern = re.compile(schedules.time_zone_pattern())
    for name in zoneinfo.available_timezones() | {"Europe/Atlantis", "europe/berlin", "Europe/", "UTC/"}:
        try:
            schedules.validated({"timezone": name})
            accepted = True
        except Invalid:
            accepted = False
        assert bool(pattern.fullmatch(name)) == accepted, name
