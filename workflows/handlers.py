"""The TASK handler registry: plain Python functions registered by name.

A leaf module (it imports nothing from the project), so that publish-time validation
(``workflows.services``) and the TASK vertex that runs handlers both use it without an
import cycle. Handler authors import it as ``from executions.handlers import handler,
NonRetryable, HandlerContext``.

A handler receives the rendered ``input`` of its TASK vertex and a ``HandlerContext``, and
returns a JSON-serialisable output. Raising ``NonRetryable`` fails the step at once; any
other exception is retried according to the vertex's ``retry`` policy. Handlers run
at least once per step: forward ``context.idempotency_key`` to anything with side effects.

    @handler("billing.charge")
    def charge(data, context):
        return api.post("/charges", json=data, headers={"Idempotency-Key": context.idempotency_key})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class NonRetryable(Exception):
    """Raise from a handler (or vertex) to fail the step without further attempts."""


@dataclass(frozen=True)
class HandlerContext:
    execution_id: str
    vertex: str
    attempt: int
    idempotency_key: str


Handler = Callable[[Any, HandlerContext], Any]
registry: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register ``func`` as the TASK handler called ``name``; a second function under the
    same name is refused (ValueError)."""

    def register(func: Handler) -> Handler:
        if name in registry and registry[name] is not func:
            raise ValueError(f"a TASK handler named {name!r} is already registered")
        registry[name] = func
        return func

    return register
