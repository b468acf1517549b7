"""HTTP: call a Destination (S11). The step holds one of the destination's slots while it
runs (claimed atomically with the step, leases.py). Timeouts, transport errors, 429 and 5xx
are retried per the vertex's ``retry``; other 4xx fail at once. The step's stable
idempotency key goes out as the ``Idempotency-Key`` header."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import httpx

from executions import destinations
from executions.handlers import NonRetryable
from executions.outcomes import Outcome, failed, succeeded
from executions.runs import StepRun
from executions.vertices.common import needs_of
from workflows.dsl import ast
from workflows.dsl.paths import render, render_placeholders

_local = threading.local()


def _client() -> httpx.Client:
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client(follow_redirects=False)
    return client


def needs(vertex: ast.Http) -> set[str]:
    return needs_of(vertex.body, strings=(vertex.path,))


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Http, step.vertex)
    if step.destination is None:
        raise NonRetryable(f"no destination named '{vertex.destination}' in this workspace")
    destination = step.destination
    url = destination["base_url"].rstrip("/") + render_placeholders(vertex.path, step.context)
    body = render(vertex.body, step.context) if vertex.body is not None else None
    headers = {**dict(vertex.headers), "Idempotency-Key": step.idempotency_key}
    timeout = min(float(destination["timeout_seconds"]), vertex.timeout_seconds)
    started = time.monotonic()
    try:
        response = _client().request(vertex.method, url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        destinations.record_call(destination["id"], step.step_id, None, time.monotonic() - started, "timeout")
        return failed(f"{vertex.method} {url} timed out after {timeout:g}s")
    except httpx.HTTPError as error:
        destinations.record_call(destination["id"], step.step_id, None, time.monotonic() - started, str(error))
        return failed(f"{vertex.method} {url} failed: {type(error).__name__}: {error}")
    elapsed = time.monotonic() - started
    ok = response.status_code < 400
    destinations.record_call(destination["id"], step.step_id, response.status_code, elapsed,
                             "" if ok else response.text[:200])
    if ok:
        return succeeded({"status": response.status_code, "body": _body(response)})
    message = f"{vertex.method} {url} returned HTTP {response.status_code}: {response.text[:300]}"
    if response.status_code == 429 or response.status_code >= 500:
        return failed(message)
    raise NonRetryable(message)


def _body(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text
