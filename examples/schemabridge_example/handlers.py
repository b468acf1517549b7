"""Two TASK handlers: ``example.greet`` (a plain function, run on a worker thread) and
``example.notify`` (a coroutine, run on the worker's event loop), which POSTs to an HTTP API
with the step's idempotency key, so a retried attempt is recognised by the receiver."""

from __future__ import annotations

from typing import Any

import httpx

from executions.handlers import HandlerContext, NonRetryable, handler

NOTIFY_TIMEOUT_SECONDS = 10.0


@handler("example.greet")
def greet(data: Any, context: HandlerContext) -> dict[str, Any]:
    """``{"name": "Ada"}`` → ``{"greeting": "Hello, Ada!"}``; a missing name is the input's
    fault, so retrying cannot help: NonRetryable."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise NonRetryable("example.greet needs {\"name\": \"<a non-empty string>\"}")
    return {"greeting": f"Hello, {data['name'].strip()}!"}


@handler("example.notify")
async def notify(data: Any, context: HandlerContext) -> dict[str, Any]:
    """POST ``data["message"]`` to ``data["url"]`` with ``Idempotency-Key: <the step's key>``.
    A 4xx answer fails the step (NonRetryable); a 5xx or a network error raises and is retried
    by the vertex's retry policy."""
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise NonRetryable("example.notify needs {\"url\": \"https://…\", \"message\": …}")
    async with httpx.AsyncClient(timeout=NOTIFY_TIMEOUT_SECONDS) as client:
        response = await client.post(data["url"], json={"message": data.get("message")},
                                     headers={"Idempotency-Key": context.idempotency_key})
    if 400 <= response.status_code < 500:
        raise NonRetryable(f"the API refused the notification: HTTP {response.status_code}")
    response.raise_for_status()
    return {"status": response.status_code, "idempotencyKey": context.idempotency_key}
