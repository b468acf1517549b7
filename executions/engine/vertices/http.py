"""HTTP: call a Destination (S11). The step holds one of the destination's slots while it
runs (claimed atomically with the step, leases.py). Timeouts, transport errors and 5xx
are retried per the vertex's ``retry``; other 4xx fail at once. A throttled answer (429, or 503
with Retry-After) waits for the destination's cooldown without using an attempt, and a failed
one while its breaker is open waits too (the commit decides: executions/core/flow.py). The
step's stable idempotency key goes out as the ``Idempotency-Key`` header.

With ``waitForCallback`` (the pattern of ``.waitForTaskToken``: start the job and hand it the
way back in one step) the step runs on a thread: it registers its callback wait first, in a
fenced transaction of its own, so the token exists before it leaves in the request (body and
headers may use ``$.callback.url`` and ``$.callback.token``); after a 2xx answer it waits for
the callback instead of succeeding — or, if the callback came back while the call was still
in flight, finishes with it at once (core/waits.py).

The call itself goes through ``executions.destinations.outbound`` (address checks, no redirects, a byte
cap and one deadline). The destination's credentials are opened here, at call time, added as
headers, and redacted from every error text this module produces.

A path placeholder is one literal path segment: its value is percent-encoded (``/``
included), and a ``.`` or ``..`` segment is refused, so the URL always stays under the
destination's base URL."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import httpx

from executions.core import calls as call_log
from executions.core import waits
from executions.core.outcomes import Outcome, awaiting, committed, failed, succeeded
from executions.core.runs import StepRun
from executions.destinations import credentials, outbound, throttling
from executions.engine.vertices.common import needs_of
from executions.handlers import NonRetryable
from workflows.dsl import ast
from workflows.dsl.paths import is_path_string, render, render_placeholders


def needs(vertex: ast.Http) -> set[str]:
    return needs_of(vertex.body, strings=(vertex.path,))


@dataclass
class Call:
    """One HTTP step's request, rendered and with its credentials added."""

    step: StepRun
    method: str
    url: str
    body: Any
    headers: dict[str, str]
    timeout: float
    max_bytes: int
    hidden: list[str]
    started: float = field(default_factory=time.monotonic)

    @property
    def shown(self) -> str:
        """The call for error messages (only a failure needs it: parsing the URL is not free)."""
        return f"{self.method} {_shown(self.url)}"

    @property
    def destination_id(self) -> int:
        return int(cast(dict[str, Any], self.step.destination)["id"])

    def record(self, status: int | None, error: str) -> tuple[int, int, int | None, float, str]:
        """A call-log row (calls.record_calls), its error text redacted."""
        return (self.destination_id, self.step.step_id, status, time.monotonic() - self.started,
                credentials.redact(error, self.hidden))


def prepare(step: StepRun) -> Call:
    vertex = cast(ast.Http, step.vertex)
    if step.destination is None:
        raise NonRetryable(f"no destination named '{vertex.destination}' in this workspace")
    destination = step.destination
    url = target_url(destination["base_url"], render_placeholders(vertex.path, step.context))
    body = render(vertex.body, step.context) if vertex.body is not None else None
    secret = _credentials(destination)
    # Every text that leaves this module (step error, event, call log) is redacted.
    hidden = credentials.secrets(secret) if secret else []
    own = {name: (str(render(value, step.context)) if vertex.wait_for_callback and is_path_string(value) else value)
           for name, value in vertex.headers}
    headers = _headers(own, credentials.headers(secret) if secret else {})
    headers["Idempotency-Key"] = step.idempotency_key
    timeout = min(float(destination["timeout_seconds"]), vertex.timeout_seconds)
    return Call(step, vertex.method, url, body, headers, timeout,
                destination["max_response_bytes"], hidden)


def run(step: StepRun) -> Outcome:
    vertex = cast(ast.Http, step.vertex)
    if vertex.wait_for_callback is not None:
        return _call_and_wait(step, vertex.wait_for_callback)
    return _call(step)


def _call(step: StepRun) -> Outcome:
    call = prepare(step)
    try:
        response: outbound.Fetched | BaseException = outbound.fetch(
            call.method, call.url, json_body=call.body, headers=call.headers, timeout=call.timeout,
            max_bytes=call.max_bytes)
    except outbound.OutboundError as error:
        response = error
    outcome, row = _judge(call, response)
    _observe(step, response)
    call_log.record_call(*row)
    return _deliver(outcome)


def _call_and_wait(step: StepRun, spec: ast.CallbackWait) -> Outcome:
    """waitForCallback: the token first (committed), then the call, then the wait — unless
    this attempt has waited already (its callback came, or it timed out)."""
    ended = waits.ended(step.state, step.attempt)
    if ended is not None:
        return ended
    wait = waits.WaitSpec(step.step_id, step.attempt, step.execution.id, step.execution.workspace_id, "callback",
                          spec.timeout_seconds, spec.heartbeat_seconds)
    with step.transaction() as tx:
        registered = waits.register(tx.cursor, [wait])[step.step_id]
    step.context["callback"] = {"url": waits.callback_url(registered.token), "token": registered.token}
    outcome = _call(step)
    if outcome.kind != "succeeded":
        return outcome  # the token dies with this attempt (a retry issues a new one)
    with step.transaction() as tx:
        completion, due_at = waits.completion_of(tx.cursor, step.step_id, step.attempt)
        tx.finish(waits.outcome_of(completion) if completion is not None
                  else awaiting(reason="waiting for a callback", due_at=due_at))
    return committed()


def runs_async(step: StepRun) -> bool:
    """HTTP steps run on the drain's event loop; one that waits for a callback writes its wait
    before and after its call, on a thread."""
    return cast(ast.Http, step.vertex).wait_for_callback is None


async def run_async(step: StepRun) -> Outcome:
    """``run`` on the event loop, through the destination's pooled async client. The call-log
    row goes to ``step.extra["calls"]``: the drain writes it (no database on the loop)."""
    call = prepare(step)
    try:
        response: outbound.Fetched | BaseException = await outbound.fetch_async(
            call.method, call.url, json_body=call.body, headers=call.headers, timeout=call.timeout,
            max_bytes=call.max_bytes, pool=call.destination_id)
    except outbound.OutboundError as error:
        response = error
    outcome, row = _judge(call, response)
    _observe(step, response)
    step.extra.setdefault("calls", []).append(row)
    return _deliver(outcome)


def _observe(step: StepRun, response: outbound.Fetched | BaseException) -> None:
    """What the answer says about the destination's flow (throttling.py), for the commit
    (executions/core/flow.py, through ``step.extra["flow"]``); a throttled answer also pauses
    the drain's slots there at once (``step.extra["pause"]``, seconds), before the commit."""
    if isinstance(response, outbound.Fetched):
        kind = throttling.kind(response.status, response.header("retry-after"))
    else:
        kind = throttling.REFUSED if isinstance(response, outbound.OutboundError) and not response.retryable \
            else throttling.FAILED
    if kind == throttling.THROTTLED and isinstance(response, outbound.Fetched):
        asked = throttling.asked_seconds(response.header, time.time())
        shown = f"{response.status}, {throttling.shown_retry_after(response.header)}"
        step.extra["flow"] = (kind, asked, shown)
        cap = float(cast(dict[str, Any], step.destination).get("max_cooldown_seconds") or 300.0)
        step.extra["pause"] = min(cap, throttling.FIRST_WAIT if asked is None else asked)
    else:
        step.extra["flow"] = (kind, None, "")


def _deliver(outcome: Outcome | NonRetryable) -> Outcome:
    if isinstance(outcome, NonRetryable):
        raise outcome
    return outcome


def _judge(call: Call, response: outbound.Fetched | BaseException) -> tuple[Outcome | NonRetryable, Any]:
    """The step's outcome (or the NonRetryable to raise) and the call-log row for a response or error."""
    hidden = call.hidden
    if isinstance(response, outbound.OutboundError):
        shown = call.shown
        row = call.record(None, str(response))
        if not response.retryable:
            return NonRetryable(credentials.redact(f"{shown} refused: {response}", hidden)), row
        return failed(credentials.redact(f"{shown} {response}" if isinstance(response, outbound.DeadlineExceeded)
                                         else f"{shown} failed: {response}", hidden)), row
    if isinstance(response, BaseException):
        shown = call.shown
        row = call.record(None, f"{type(response).__name__}: {response}")
        return failed(credentials.redact(f"{shown} failed: {type(response).__name__}: {response}", hidden)), row
    ok = response.status < 400
    excerpt = "" if ok else credentials.excerpt(response.text, len(response.content), hidden)
    row = call.record(response.status, excerpt)
    if ok:
        return succeeded({"status": response.status, "body": response.body()}), row
    message = f"{call.shown} returned HTTP {response.status}: {excerpt}"
    if response.status == 429 or response.status >= 500:
        return failed(message), row
    return NonRetryable(message), row


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


@functools.lru_cache(maxsize=4096)
def target_url(base_url: str, path: str) -> str:
    """``base_url`` + the rendered ``path``, refused (NonRetryable) when the result would not
    stay under the base URL's path: a ``.`` or ``..`` segment (also percent-encoded) or a
    fragment. Placeholder values arrive percent-encoded, so they cannot add segments.
    Cached (a refusal is not): parsing both URLs costs more than the rest of a call's
    preparation, and most calls of a step go to the same few paths."""
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
