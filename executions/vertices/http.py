"""HTTP: call a Destination (S11). The step holds one of the destination's slots while it
runs (claimed atomically with the step, leases.py). Timeouts, transport errors, 429 and 5xx
are retried per the vertex's ``retry``; other 4xx fail at once. The step's stable
idempotency key goes out as the ``Idempotency-Key`` header.

The call itself goes through ``executions.outbound`` (address checks, no redirects, a byte
cap and one deadline). The destination's credentials are opened here, at call time, added as
headers, and redacted from every error text this module produces.

A path placeholder is one literal path segment: its value is percent-encoded (``/``
included), and a ``.`` or ``..`` segment is refused, so the URL always stays under the
destination's base URL."""

from __future__ import annotations

import time
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import httpx

from executions import credentials, destinations, metrics, outbound
from executions.handlers import NonRetryable
from executions.outcomes import Outcome, failed, succeeded
from executions.runs import StepRun
from executions.vertices.common import needs_of
from workflows.dsl import ast
from workflows.dsl.paths import render, render_placeholders


def needs(vertex: ast.Http) -> set[str]:
    return needs_of(vertex.body, strings=(vertex.path,))


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Http, step.vertex)
    if step.destination is None:
        raise NonRetryable(f"no destination named '{vertex.destination}' in this workspace")
    destination = step.destination
    url = target_url(destination["base_url"], render_placeholders(vertex.path, step.context))
    shown = f"{vertex.method} {_shown(url)}"
    body = render(vertex.body, step.context) if vertex.body is not None else None
    secret = _credentials(destination)
    # Every text that leaves this function (step error, event, call log) is redacted.
    hidden = credentials.secrets(secret) if secret else []
    headers = _headers(dict(vertex.headers), credentials.headers(secret) if secret else {})
    headers["Idempotency-Key"] = step.idempotency_key
    timeout = min(float(destination["timeout_seconds"]), vertex.timeout_seconds)
    started = time.monotonic()

    def record(status: int | None, error: str) -> None:
        metrics.destination_call(step.execution.workspace_id, destination["name"], status, time.monotonic() - started)
        destinations.record_call(destination["id"], step.step_id, status, time.monotonic() - started,
                                 credentials.redact(error, hidden))

    try:
        response = outbound.fetch(vertex.method, url, json_body=body, headers=headers, timeout=timeout,
                                  max_bytes=destination["max_response_bytes"])
    except outbound.OutboundError as error:
        record(None, str(error))
        if not error.retryable:
            raise NonRetryable(credentials.redact(f"{shown} refused: {error}", hidden)) from None
        return failed(credentials.redact(f"{shown} {error}" if isinstance(error, outbound.DeadlineExceeded) else
                                         f"{shown} failed: {error}", hidden))
    except httpx.HTTPError as error:
        record(None, f"{type(error).__name__}: {error}")
        return failed(credentials.redact(f"{shown} failed: {type(error).__name__}: {error}", hidden))
    ok = response.status < 400
    excerpt = "" if ok else credentials.redact(response.excerpt(), hidden)
    record(response.status, excerpt)
    if ok:
        return succeeded({"status": response.status, "body": response.body()})
    message = f"{shown} returned HTTP {response.status}: {excerpt}"
    if response.status == 429 or response.status >= 500:
        return failed(message)
    raise NonRetryable(message)


def _credentials(destination: dict[str, Any]) -> dict[str, Any] | None:
    sealed = destination.get("credentials_sealed")
    if not sealed:
        return None
    try:
        return credentials.unseal(sealed)
    except credentials.CredentialsError as error:
        raise NonRetryable(f"destination '{destination['name']}': {error}") from None


def _headers(from_vertex: dict[str, str], from_credentials: dict[str, str]) -> dict[str, str]:
    """The vertex's headers, except those the destination's credentials set (in any case)."""
    replaced = {name.lower() for name in from_credentials}
    return {**{k: v for k, v in from_vertex.items() if k.lower() not in replaced}, **from_credentials}


def target_url(base_url: str, path: str) -> str:
    """``base_url`` + the rendered ``path``, refused (NonRetryable) when the result would not
    stay under the base URL's path: a ``.`` or ``..`` segment (also percent-encoded) or a
    fragment. Placeholder values arrive percent-encoded, so they cannot add segments."""
    route = path.split("?", 1)[0]
    for segment in route.split("/"):
        if unquote(segment) in (".", ".."):
            raise NonRetryable(f"the path {_shown(route)} has a '{unquote(segment)}' segment; "
                               f"a path (and each placeholder value) may not be '.' or '..'")
    if "#" in path:
        raise NonRetryable("the path may not contain '#' (it would cut off the rest of the URL)")
    base = base_url.rstrip("/")
    url = base + path
    try:
        under = httpx.URL(url).path.startswith(httpx.URL(base).path)
    except httpx.InvalidURL as error:
        raise NonRetryable(f"{_shown(url)} is not a valid URL: {error}") from None
    if not under:
        raise NonRetryable(f"{_shown(url)} is not under the destination's base URL")
    return url


def _shown(url: str) -> str:
    """A URL for error messages: no user name, password or query (they may carry secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
