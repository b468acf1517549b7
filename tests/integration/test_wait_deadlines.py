"""A wait's deadline is a due time the drain knows (S12, S27, issue 32): a waiting step whose
timeout or heartbeat deadline passes fails within about a second of it — whether the engine
is idle (the drain waits for it like for a TIMER's due time, instead of ending) or busy with
other steps (it sweeps when the next deadline it knows of has come, not at its next reaper
round) — and a callback result that arrived before a worker was lost on the step's last
attempt is applied, not failed as a lost lease (S5: the lease is about who applies it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from executions.models import Destination, Execution, Step, Wait
from executions.worker.loop import Drain
from tests.support import helpers, httpserver
from tests.support.clients import api, ok

pytestmark = pytest.mark.django_db(transaction=True)


def wait_doc(**wait: Any) -> dict[str, Any]:
    return {"start": "w", "vertices": {"w": {"type": "WAIT", "retry": {"maxAttempts": 1}, **wait}}}


@pytest.fixture
def lingering_drain() -> Iterator[Callable[[], threading.Thread]]:
    """Start a drain as a worker runs it (it lingers: LISTEN and due times), on a thread of
    its own; each is joined before the test's database is flushed."""
    started: list[threading.Thread] = []

    def start(idle_seconds: float = 1.0, max_seconds: float = 25.0) -> threading.Thread:
        def run() -> None:
            try:
                Drain(max_seconds=max_seconds, idle_seconds=idle_seconds, threads=2, batch=16).run()
            finally:
                connection.close()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.join(60)
        assert not thread.is_alive()


def finished_at(execution: Execution, timeout: float) -> float | None:
    """When (time.monotonic()) the execution became terminal, or None within ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if helpers.refresh(execution).is_terminal:
            return time.monotonic()
        time.sleep(0.05)
    return None


def waiting_since(execution: Execution, vertex: str = "w", timeout: float = 10.0) -> float:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if Step.objects.filter(execution=execution, vertex=vertex, status="WAITING").exists():
            return time.monotonic()
        time.sleep(0.02)
    raise AssertionError(f"{vertex} never waited")


@pytest.mark.parametrize("wait", [
    {"for": "callback", "timeoutSeconds": 2},
    {"for": "callback", "timeoutSeconds": 600, "heartbeatSeconds": 2},
    {"for": "event", "event": "deploy.ready", "timeoutSeconds": 2},
], ids=["callback", "heartbeat", "event"])
def test_an_idle_engine_times_a_wait_out_at_its_deadline(workspace, wait, lingering_drain):
    """The drain's idle wait (idle_seconds=1) would end long before the deadline if it did not
    know it; it waits for it instead and fails the step about when it is due."""
    helpers.publish(workspace, "w", wait_doc(**wait))
    execution = helpers.start(workspace, "w", {})
    drain = lingering_drain()
    began = waiting_since(execution)
    done = finished_at(execution, 15)
    assert done is not None, "the wait never timed out: the idle drain did not know its deadline"
    assert done - began < 2 + 1.5, f"timed out {done - began - 2:.1f}s after its deadline"
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "timed out after 2s waiting for" in failed.error
    drain.join(30)
    assert not drain.is_alive(), "with nothing left to wait for, the drain ends"


def test_a_busy_engine_times_a_wait_out_at_its_deadline_not_at_its_next_reaper_round(workspace, lingering_drain):
    """While the drain has a long call in flight it turns constantly and reaps every few
    seconds; the wait's deadline (1 s) must not wait for that round."""
    with httpserver.serve() as (url, _):
        Destination.objects.create(workspace=workspace, name="slow", base_url=url)
        helpers.publish(workspace, "slow", helpers.http_doc("slow", "/slow/8"))
        helpers.publish(workspace, "w", wait_doc(**{"for": "callback", "timeoutSeconds": 1}))
        busy = helpers.start(workspace, "slow", {})
        drain = lingering_drain()
        assert waiting_running(busy), "the slow call is in flight"
        time.sleep(0.5)  # the drain reaped at its first turn; its next round is ~5 s away
        execution = helpers.start(workspace, "w", {})
        began = waiting_since(execution)
        done = finished_at(execution, 6)
        assert done is not None and done - began < 1 + 1.5, (
            "the wait timed out at the reaper's round, not at its deadline"
            if done else "the wait did not time out while the drain was busy")
        assert not helpers.refresh(busy).is_terminal, "the drain was busy all along"
        drain.join(30)  # before the slow server goes


def waiting_running(execution: Execution, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if Step.objects.filter(execution=execution, status="RUNNING").exists():
            return True
        time.sleep(0.02)
    return False


def test_a_callback_result_survives_a_lost_worker_on_the_last_attempt(workspace):
    """The callback was accepted (200) and woke the step; its worker is lost on the step's
    only attempt: the next claim applies the result (the lease decides who applies it, S5)."""
    helpers.publish(workspace, "w", {"start": "w", "vertices": {
        "w": {"type": "WAIT", "for": "callback", "timeoutSeconds": 600, "retry": {"maxAttempts": 1},
              "next": "done"},
        "done": {"type": "SUCCEED", "output": {"got": "$.steps.w.output"}}}})
    execution = helpers.start(workspace, "w", {})
    helpers.run_engine()
    token = ok(api(workspace, "operator").get(f"/api/v1/executions/{execution.pk}/steps/w/callback"))["token"]
    ok(APIClient().post(f"/api/v1/callbacks/{token}", {"status": "SUCCEEDED", "output": {"kept": 1}}, format="json"))
    [run] = helpers.claim_runs()
    assert (run.vertex.id, run.attempt, run.claimed.max_attempts) == ("w", 1, 1), "the last attempt"
    helpers.lose_leases()
    step = helpers.step(execution, "w")
    assert step.status == "READY", f"the lost lease failed the step: {step.error}"
    assert step.lease_expiries == 1
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    assert ok(api(workspace).get(f"/api/v1/executions/{execution.pk}"))["output"] == {"got": {"kept": 1}}
    assert Wait.objects.filter(step_id=step.pk).count() == 1, "it did not wait again"


def test_a_timeout_is_a_result_too_and_is_applied_after_a_lost_worker(workspace):
    """The reaper timed the wait out (the result: a failed attempt); the worker applying it is
    lost on the last attempt: the next claim fails the step with the timeout, not a lost lease."""
    helpers.publish(workspace, "w", wait_doc(**{"for": "callback", "timeoutSeconds": 600}))
    execution = helpers.start(workspace, "w", {})
    helpers.run_engine()
    with connection.cursor() as cursor:  # woken by a timeout of the reaper's: the result is a failure
        cursor.execute("UPDATE executions_step SET due_at = now() - interval '1 second' WHERE status = 'WAITING'")
    helpers.lose_leases()  # the reaper times the wait out (the step is READY with the timeout)
    [run] = helpers.claim_runs()
    assert run.vertex.id == "w"
    helpers.lose_leases()
    assert helpers.step(execution, "w").status == "READY", "the timeout is applied by the next claim"
    helpers.run_engine()
    failed = helpers.refresh(execution)
    assert failed.status == "FAILED" and "timed out after 600s waiting for a callback" in failed.error

