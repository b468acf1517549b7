"""Rotating a destination's credentials or base URL (issue 28, section 4): every call that
starts after the change has returned uses the new values, including calls of steps a drain
claimed before the change and queued for one of its slots.

The loopback server holds each call open until the test releases it, so "started after the
change returned" is a fact the test controls, not a timing: with a limit of one, nothing else
can start while the first call is held, and the test releases it only after the PATCH returned.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

from executions.models import Destination, Step
from executions.worker import Drain
from tests.support import helpers
from tests.support.clients import api, ok
from tests.support.cluster import wait_for
from tests.support.httpserver import Recorder, serve

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 6  # one in the slot, QUEUE_DEPTH queued behind it, one left READY


@contextmanager
def draining(threads: int = 2) -> Iterator[None]:
    """A drain on a thread of its own until nothing is claimable (and nothing in flight)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Drain(max_seconds=60, idle_seconds=0, threads=threads, batch=16, linger=False).run()
        except BaseException as error:  # handed to the test below
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield
    finally:
        thread.join(60)
    assert not thread.is_alive() and not errors, errors


def start_calls(workspace: Any, client: Any, base_url: str, **fields: Any) -> Destination:
    ok(client.post("/api/v1/destinations", {"name": "api", "base_url": base_url, "concurrency_limit": 1,
                                            **fields}, format="json"), 201)
    helpers.publish(workspace, "call", helpers.http_doc("api", "/hold"))
    for i in range(CALLS):
        helpers.start(workspace, "call", {"i": i})
    return Destination.objects.get(workspace=workspace, name="api")


def held_with_a_queue(recorder: Recorder, api_: Destination) -> None:
    """The first call is held at the server, and the drain has claimed steps behind it into
    its queue (RUNNING without a slot): they were loaded before the change to come."""
    wait_for(lambda: len(recorder.requests) == 1, timeout=20, what="the first call", interval=0.01)
    wait_for(lambda: Step.objects.filter(destination=api_, status="RUNNING", holds_slot=False).exists(),
             timeout=20, what="steps queued behind the held call", interval=0.01)


def authorization(request: dict[str, Any]) -> str:
    return next((v for k, v in request["headers"].items() if k.lower() == "authorization"), "")


def test_new_credentials_reach_every_call_that_starts_after_the_patch_returned(workspace):
    client = api(workspace, "operator")
    with serve() as (url, recorder):
        api_ = start_calls(workspace, client, url, credentials={"bearer": "old-token"})
        with draining():
            held_with_a_queue(recorder, api_)
            ok(client.patch("/api/v1/destinations/api", {"credentials": {"bearer": "new-token"}}, format="json"))
            recorder.released.set()  # the held call ends: the queued ones start, after the PATCH returned
        sent = [authorization(request) for request in recorder.requests]
    assert sent[0] == "Bearer old-token", "the call in flight before the change went out as it was"
    assert sent[1:] == ["Bearer new-token"] * (CALLS - 1), f"calls that started after the change: {sent[1:]}"
    assert Step.objects.filter(destination=api_, status="SUCCEEDED").count() == CALLS


def test_a_new_base_url_reaches_every_call_that_starts_after_the_patch_returned(workspace):
    client = api(workspace, "operator")
    with serve() as (old_url, old), serve() as (new_url, new):
        new.released.set()  # the new server answers at once
        api_ = start_calls(workspace, client, old_url + "/v1")
        with draining():
            held_with_a_queue(old, api_)
            ok(client.patch("/api/v1/destinations/api", {"base_url": new_url + "/v2"}, format="json"))
            old.released.set()
        assert [request["path"] for request in old.requests] == ["/v1/hold"], \
            f"only the call in flight before the change reached the old base URL: {old.requests[1:]}"
        assert [request["path"] for request in new.requests] == ["/v2/hold"] * (CALLS - 1)
        assert {request["headers"]["Host"] for request in new.requests} == {new_url.removeprefix("http://")}
    assert Step.objects.filter(destination=api_, status="SUCCEEDED").count() == CALLS


def test_an_inline_drain_sends_later_calls_of_its_batch_with_the_new_values(workspace):
    """An inline drain (``threads=0``) runs the steps of its claim one after another: the ones
    that start after the change returned use the new values too."""
    client = api(workspace, "operator")
    with serve() as (url, recorder):
        ok(client.post("/api/v1/destinations", {"name": "api", "base_url": url,
                                                "credentials": {"bearer": "old-token"}}, format="json"), 201)
        helpers.publish(workspace, "call", helpers.http_doc("api", "/hold"))
        for i in range(3):
            helpers.start(workspace, "call", {"i": i})
        with draining(threads=0):
            wait_for(lambda: len(recorder.requests) == 1, timeout=20, what="the first call", interval=0.01)
            assert Step.objects.filter(status="RUNNING").count() == 3, "one claim took the three steps"
            ok(client.patch("/api/v1/destinations/api", {"credentials": {"bearer": "new-token"}}, format="json"))
            recorder.released.set()
        sent = [authorization(request) for request in recorder.requests]
    assert sent == ["Bearer old-token", "Bearer new-token", "Bearer new-token"]


def config_version(destination: Destination) -> int:
    destination.refresh_from_db()
    return destination.config_version


@pytest.mark.parametrize(("column", "value"), [
    ("name", "'renamed'"), ("base_url", "'http://127.0.0.1:10/other'"), ("timeout_seconds", "3"),
    ("max_response_bytes", "1234"), ("credentials_sealed", "'gAAAA-new'"),
])
def test_every_column_a_call_reads_bumps_the_config_version_whoever_writes_it(workspace, column, value):
    api_ = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9")
    before = config_version(api_)
    with connection.cursor() as cursor:  # not through the service: the database keeps the rule
        cursor.execute(f"UPDATE executions_destination SET {column} = {value} WHERE id = %s", [api_.pk])
    assert config_version(api_) == before + 1


def test_limits_rates_and_the_rate_bucket_leave_the_config_version_alone(workspace):
    api_ = Destination.objects.create(workspace=workspace, name="api", base_url="http://127.0.0.1:9")
    before = config_version(api_)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_destination SET concurrency_limit = 3, rate_per_second = 5, "
                       "rate_tokens = 2, rate_updated_at = now(), updated_at = now() WHERE id = %s", [api_.pk])
        cursor.execute("UPDATE executions_destination SET base_url = base_url WHERE id = %s", [api_.pk])
    assert config_version(api_) == before, "only a changed value is a new version"


def test_a_change_waits_for_old_copies_only_when_it_changes_what_calls_use_and_steps_run(workspace, monkeypatch):
    waits: list[str] = []
    monkeypatch.setattr("executions.core.calls.outlive_copies", lambda: waits.append("waited"))
    client = api(workspace, "operator")
    ok(client.post("/api/v1/destinations", {"name": "api", "base_url": "http://127.0.0.1:9"}, format="json"), 201)
    ok(client.patch("/api/v1/destinations/api", {"timeout_seconds": 3}, format="json"))
    assert waits == [], "no step runs: no drain holds a copy that could start a call"
    helpers.publish(workspace, "call", helpers.http_doc("api"))
    helpers.start(workspace, "call", {})
    assert len(helpers.claim()) == 1  # RUNNING: its drain may start it with the copy it read
    ok(client.patch("/api/v1/destinations/api", {"concurrency_limit": 4}, format="json"))
    assert waits == [], "a limit is read at each claim, not from a copy"
    ok(client.patch("/api/v1/destinations/api", {"base_url": "http://127.0.0.1:10"}, format="json"))
    assert waits == ["waited"], "the PATCH returned only after the old copies lapsed"
