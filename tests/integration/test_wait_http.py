"""An HTTP vertex with waitForCallback (S27, issue 32), against a partner on loopback that
calls back to the live server: the token leaves in the request (body and headers), the step
waits after the 2xx, and a callback that arrives before the step has committed its wait (the
partner was fast) is not lost."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.conf import settings

from executions.models import Destination, Step
from tests.support import helpers, httpserver
from tests.support.clients import api, ok

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def partner(*, call_back_first: bool, status: int = 202) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A job service: it records each request and — before answering when ``call_back_first``
    — POSTs the result to the request's callback URL."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"body": body, "token_header": self.headers.get("X-Callback-Token")})
            if call_back_first:
                call_back(body["callback"], {"status": "SUCCEEDED", "output": {"job": body["job"], "fast": True}})
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    with httpserver.serving(Handler) as url:
        yield url, seen


def call_back(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",  # noqa: S310 - loopback
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the live server on loopback
        return int(response.status)


def job_doc() -> dict[str, Any]:
    return {"start": "job", "vertices": {"job": {
        "type": "HTTP", "destination": "jobs", "path": "/jobs",
        "body": {"job": "$.input.job", "callback": "$.callback.url"},
        "headers": {"X-Callback-Token": "$.callback.token"},
        "waitForCallback": {"timeoutSeconds": 600}, "retry": {"maxAttempts": 1}}}}


@pytest.fixture
def public_url(live_server: Any) -> Iterator[None]:
    before = settings.SB
    settings.SB = {**before, "PUBLIC_URL": live_server.url}
    try:
        yield
    finally:
        settings.SB = before


def test_the_step_hands_out_its_token_and_waits_after_the_2xx(workspace, public_url):
    with partner(call_back_first=False) as (url, seen):
        Destination.objects.create(workspace=workspace, name="jobs", base_url=url)
        helpers.publish(workspace, "job", job_doc())
        execution = helpers.start(workspace, "job", {"job": 7})
        helpers.run_engine()
    step = helpers.step(execution, "job")
    assert step.status == "WAITING" and step.lease_token is None
    [request] = seen
    assert request["body"]["callback"].endswith(f"/api/v1/callbacks/{request['token_header']}")
    assert call_back(request["body"]["callback"], {"status": "SUCCEEDED", "output": {"done": 7}}) == 200
    helpers.run_engine()
    finished = helpers.refresh(execution)
    assert finished.status == "SUCCEEDED"
    assert ok(api(workspace).get(f"/api/v1/executions/{execution.pk}"))["output"] == {"done": 7}


def test_a_callback_before_the_step_commits_its_wait_is_not_lost(workspace, public_url):
    with partner(call_back_first=True) as (url, seen):
        Destination.objects.create(workspace=workspace, name="jobs", base_url=url)
        helpers.publish(workspace, "job", job_doc())
        execution = helpers.start(workspace, "job", {"job": 8})
        helpers.run_engine()
    assert len(seen) == 1
    finished = helpers.refresh(execution)
    assert finished.status == "SUCCEEDED", (finished.status, finished.error)
    assert not Step.objects.filter(execution=execution, status="WAITING").exists()


def test_a_failed_call_fails_the_attempt_and_its_token_is_gone(workspace, public_url):
    with partner(call_back_first=False, status=400) as (url, seen):
        Destination.objects.create(workspace=workspace, name="jobs", base_url=url)
        helpers.publish(workspace, "job", job_doc())
        execution = helpers.start(workspace, "job", {"job": 9})
        helpers.run_engine()
    assert helpers.refresh(execution).status == "FAILED"
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as refused:
        call_back(seen[0]["body"]["callback"], {"status": "SUCCEEDED"})
    assert refused.value.code == 410
    refused.value.close()
