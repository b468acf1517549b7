"""Waiting survives a lost worker (S27, issue 32), on a real qcluster: a worker SIGKILLed
while a callback arrives — the HTTP call that handed the token out is still in flight, the
partner has already called back (200) — loses nothing: the step's next attempt finishes with
that callback's result, without calling the partner again."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.db import connection

from bench.chaos import lab as chaos_lab
from executions.models import Destination, Step
from executions.services import waits as services
from tests.support import factories, helpers, httpserver

pytestmark = [pytest.mark.fault, pytest.mark.e2e, pytest.mark.timeout(180)]

def job(max_attempts: int) -> dict[str, Any]:
    return {"start": "job", "vertices": {"job": {
        "type": "HTTP", "destination": "jobs", "path": "/jobs",
        "body": {"token": "$.callback.token", "n": "$.input.n"},
        "waitForCallback": {"timeoutSeconds": 600}, "retry": {"maxAttempts": max_attempts, "backoffSeconds": 0}}}}


@contextmanager
def partner() -> Iterator[tuple[str, dict[str, Any]]]:
    """A job service that calls back at once — before it answers — and then holds the call
    until the test lets it go (by then the worker that made it is dead)."""
    state: dict[str, Any] = {"requests": 0, "called_back": threading.Event(), "release": threading.Event()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["requests"] += 1
            try:
                state["answer"] = services.complete_callback(
                    body["token"], services.completion("SUCCEEDED", {"job": body["n"], "done": True}))
            finally:
                connection.close()
            state["called_back"].set()
            state["release"].wait(60)
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with httpserver.serving(Handler) as url:
        try:
            yield url, state
        finally:
            state["release"].set()  # before the server shuts down: a handler may be waiting on it


@pytest.mark.parametrize("max_attempts", [3, 1], ids=["attempts-left", "last-attempt"])
def test_a_worker_killed_while_its_callback_arrives_loses_nothing(lab, max_attempts):
    """On the last attempt too: the lost lease does not fail a step whose callback result is
    there; the next claim applies it at the same attempt (it costs none)."""
    workspace = factories.default_workspace()
    with partner() as (url, state):
        Destination.objects.create(workspace=workspace, name="jobs", base_url=url)
        helpers.publish(workspace, "job", job(max_attempts))
        execution = helpers.start(workspace, "job", {"n": 5})
        cluster = lab.cluster()
        try:
            assert state["called_back"].wait(60), "the partner was never called"
            assert state["answer"].changed, "the callback was accepted"
            step = helpers.step(execution, "job")
            assert step.status == "RUNNING", "the call is still in flight"
            [pid] = chaos_lab.leased_by([step.pk]).values()
            cluster.signal(pid, signal.SIGKILL)
            state["release"].set()
            chaos_lab.wait_for(lambda: helpers.refresh(execution).is_terminal, timeout=90,
                               what="the execution to finish after the kill")
        finally:
            cluster.stop()
    finished = helpers.refresh(execution)
    assert finished.status == "SUCCEEDED", (finished.status, finished.error)
    step = Step.objects.get(pk=step.pk)
    expected = (2, 1) if max_attempts > 1 else (1, 1)
    assert (step.attempt, step.lease_expiries) == expected, "the lost lease cost an attempt only if one was left"
    assert state["requests"] == 1, "the partner was not called again: its callback was kept"
    assert helpers.step(execution, "job").state["wait"]["result"]["output"] == {"job": 5, "done": True}
