"""Destination flow control on real PostgreSQL against a loopback server (issue 29, S21/S22):
a throttled answer costs no attempt and cools the whole destination down — across drains —,
max_throttled_waits bounds it, the adaptive limit moves, and the breaker opens, probes and
closes. The server answers ``/scripted`` requests as each test's script says
(tests/support/httpserver.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from executions import selectors
from executions.core import calls as calls_module
from executions.core import leases
from executions.models import Destination, Step
from executions.worker.loop import Drain
from tests.support import helpers
from tests.support.cluster import wait_for
from tests.support.httpserver import serve

RETRY = {"maxAttempts": 3, "backoffSeconds": 60}


def calls(workspace: Any, destination: str, count: int, retry: dict[str, Any] = RETRY) -> list[Any]:
    doc = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": destination, "path": "/scripted",
                                                  "retry": retry}}}
    helpers.publish(workspace, "call", doc)
    return [helpers.start(workspace, "call", {"i": i}) for i in range(count)]


def steps(executions: list[Any]) -> list[Step]:
    return [helpers.step(execution, "call") for execution in executions]


@pytest.mark.django_db
def test_a_throttled_answer_costs_no_attempt_and_stops_every_call_until_retry_after(workspace):
    with serve() as (url, recorder):
        recorder.script = lambda n: (429, {"Retry-After": "30"}) if n == 0 else (200, {})
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5)
        first, second = calls(workspace, "api", 2)
        helpers.run_engine(batch=1)  # one call, its commit, then a claim that finds the destination cooling
        assert recorder.scripted == 1, "no other execution's step called before Retry-After ran out"
    api.refresh_from_db()
    step = helpers.step(first, "call")
    assert (step.status, step.attempt, step.throttled_waits) == ("READY", 1, 1)
    assert api.cooling_until is not None
    assert step.due_at == api.cooling_until
    cooling_until = api.cooling_until.isoformat(timespec="milliseconds")
    assert step.wait_reason == f"throttled by api until {cooling_until} (429, Retry-After 30)"
    assert helpers.step(second, "call").status == "READY" and helpers.step(second, "call").attempt == 1
    assert api.throttle_streak == 1
    # What the UI reads: why each step waits, and the call log's figures for the chart.
    assert selectors.steps.waiting(step).kind == "destination cooldown"
    assert selectors.destinations.slots([api.pk])[api.pk].held.startswith(
        "destination 'api' is cooling down after a throttled answer until")
    buckets = [b for b in selectors.destinations.history([api.pk])[api.pk] if b.calls]
    assert [(b.calls, b.throttled, b.errors) for b in buckets] == [(1, 1, 1)]


@pytest.mark.django_db
def test_max_throttled_waits_bounds_the_free_waits_of_a_round(workspace):
    with serve() as (url, recorder):
        recorder.script = lambda n: (429, {"Retry-After": "0"})  # due again at once
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5,
                                   max_throttled_waits=2)
        [execution] = calls(workspace, "api", 1)
        helpers.run_engine()
        assert recorder.scripted == 3, "two free waits, then the third throttled answer is a failed attempt"
    step = helpers.step(execution, "call")
    assert (step.status, step.attempt, step.throttled_waits) == ("READY", 2, 2)
    assert step.wait_reason.startswith("retry backoff after:") and "returned HTTP 429" in step.error


def drain(label: str, local: threading.local, done: threading.Event) -> None:
    """A drain with threads and a worker label of its own (two drains of one process)."""
    local.label = label
    try:
        while not done.is_set():
            Drain(max_seconds=30, idle_seconds=0.2, threads=2, batch=16, linger=True).run()
    finally:
        connection.close()


def until(condition: Any, what: str, timeout: float = 20.0) -> Any:
    return wait_for(condition, timeout=timeout, what=what, interval=0.02)


@pytest.mark.django_db(transaction=True)
def test_a_cooldown_one_drain_met_stops_the_calls_of_another_drain_until_it_ends(workspace, monkeypatch):
    """Drain B holds two calls in flight and steps queued behind them; drain A's call gets the
    429. When B's calls end, during the cooldown, B starts none of its queued steps: the
    cooldown reaches it (its copy of the destination says so once read again, calls.FLOW_SECONDS)
    and no call arrives before the cooldown's end."""
    local = threading.local()
    monkeypatch.setattr(leases, "worker_label", lambda: getattr(local, "label", "test:0"))
    release = threading.Event()

    def script(n: int) -> tuple[int, dict[str, str]]:
        if n < 2:  # drain B's two calls: held until the test releases them
            release.wait(20)
            return 200, {}
        return (429, {"Retry-After": "3"}) if n == 2 else (200, {})

    with serve() as (url, recorder):
        recorder.script = script
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=20,
                                         concurrency_limit=2)
        executions = calls(workspace, "api", 12)
        done = threading.Event()
        b = threading.Thread(target=drain, args=("host-b:1", local, done))
        b.start()
        until(lambda: recorder.scripted == 2, "drain B's two calls")
        until(lambda: Step.objects.filter(status="RUNNING", holds_slot=False, leased_by="host-b:1").exists(),
              "steps queued in drain B")
        Destination.objects.filter(pk=api.pk).update(concurrency_limit=3)  # one slot for drain A
        a = threading.Thread(target=drain, args=("host-a:1", local, done))
        a.start()
        until(lambda: Destination.objects.get(pk=api.pk).cooling_until is not None, "drain A's cooldown")
        cooling_until = Destination.objects.get(pk=api.pk).cooling_until.timestamp()
        time.sleep(calls_module.FLOW_SECONDS + 0.2)  # B's copy must be read again before it starts a call
        released_at = time.time()
        release.set()
        until(lambda: all(helpers.refresh(e).status == "SUCCEEDED" for e in executions), "every call", timeout=30)
        done.set()
        a.join(30)
        b.join(30)
        arrivals = [request["at"] for request in recorder.requests]
    early = [at for at in arrivals if released_at <= at < cooling_until]
    assert early == [], f"{len(early)} calls started during the cooldown"
    assert len(arrivals) == 13, "twelve calls and the throttled one"
    assert [s.attempt for s in steps(executions)] == [1] * 12, "the throttled step used no attempt"


@pytest.mark.django_db(transaction=True)  # its windows need database time to pass
def test_the_adaptive_limit_grows_while_calls_go_well_and_shrinks_on_failures(workspace):
    failing = threading.Event()

    def script(n: int) -> tuple[int, dict[str, str]]:
        time.sleep(0.02)
        return (503, {}) if failing.is_set() else (200, {})

    with serve() as (url, recorder):
        recorder.script = script
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5,
                                         concurrency_limit=8, concurrency_mode="adaptive", concurrency_min=1)
        calls(workspace, "api", 80)
        helpers.run_engine(max_seconds=60)
        api.refresh_from_db()
        assert 1 < api.concurrency_current <= 8, "grew from the floor, never above the ceiling"
        assert api.concurrency_reason.startswith(("increased", "back"))
        grown = api.concurrency_current
        failing.set()
        more = [helpers.start(workspace, "call", {"i": i}) for i in range(40)]
        helpers.run_engine(max_seconds=60)
    api.refresh_from_db()
    assert api.concurrency_current < grown
    assert api.concurrency_current >= 1, "not below the floor"
    assert api.concurrency_reason.startswith("decreased")
    assert all(s.attempt == 2 for s in steps(more)), "a 503 without Retry-After is a failed attempt"


@pytest.mark.django_db(transaction=True)
def test_the_breaker_opens_holds_calls_probes_once_and_closes(workspace):
    failing = threading.Event()
    failing.set()
    states: list[str] = []

    def script(n: int) -> tuple[int, dict[str, str]]:
        if n >= 10:  # a probe: what the database says of the destination while it runs
            states.append(Destination.objects.values_list("breaker_state", flat=True).get())
            connection.close()
        return (500, {}) if failing.is_set() else (200, {})

    with serve() as (url, recorder):
        recorder.script = script
        api = Destination.objects.create(
            workspace=workspace, name="api", base_url=url, timeout_seconds=5,
            breaker={"failure_ratio": 0.5, "min_calls": 4, "window_seconds": 30, "open_seconds": 0.5})
        executions = calls(workspace, "api", 10)
        helpers.run_engine()
        api.refresh_from_db()
        assert api.breaker_state == "open" and recorder.scripted == 10
        assert [s.attempt for s in steps(executions)] == [1] * 10, "waiting for a failing destination uses no attempt"
        opened_until = api.breaker_open_until.isoformat(timespec="milliseconds")
        assert steps(executions)[0].wait_reason.startswith(
            f"destination api is failing: circuit open until {opened_until}")
        helpers.run_engine()
        assert recorder.scripted == 10, "no call while it is open"
        until(lambda: Destination.objects.get(pk=api.pk).breaker_open_until.timestamp() < time.time(), "open_seconds")
        helpers.run_engine()
        assert recorder.scripted == 11, "one probe"
        api.refresh_from_db()
        assert api.breaker_state == "open", "the probe failed: open again"
        assert [s.attempt for s in steps(executions)] == [1] * 10, "a failed probe costs no attempt either"
        failing.clear()
        until(lambda: Destination.objects.get(pk=api.pk).breaker_open_until.timestamp() < time.time(), "open_seconds")
        helpers.run_engine()
    api.refresh_from_db()
    assert api.breaker_state == "closed"
    assert states[:2] == ["half_open", "half_open"], "each probe ran half-open"
    assert [helpers.refresh(e).status for e in executions] == ["SUCCEEDED"] * 10
    assert [s.attempt for s in steps(executions)] == [1] * 10
    assert recorder.scripted == 10 + 1 + 10, "then the probe and the nine others"
