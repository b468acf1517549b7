"""TASK handlers used only by in-process tests (a qcluster subprocess does not load them)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from demo.models import DemoSwitch
from executions.handlers import HandlerContext, NonRetryable, handler

FLAKY_SWITCH = "test-flaky-failing"
calls: list[tuple[str, str, int]] = []


@handler("test.increment")
def increment(data: Any, context: HandlerContext) -> Any:
    return {"n": int(data.get("n", 0)) + 1}


@handler("test.flaky")
def flaky(data: Any, context: HandlerContext) -> Any:
    """Fails for inputs with ``fail: true`` while the switch is on; succeeds once it is off."""
    if isinstance(data, dict) and data.get("fail") and DemoSwitch.objects.filter(name=FLAKY_SWITCH, on=True).exists():
        raise NonRetryable(f"flaky failure for item {data.get('i')}")
    return data


@handler("test.record")
def record(data: Any, context: HandlerContext) -> Any:
    """Records each call (execution, vertex, attempt) so tests can count re-executions."""
    calls.append((context.execution_id, context.vertex, context.attempt))
    return {"key": context.idempotency_key, "attempt": context.attempt}


def set_flaky(on: bool) -> None:
    DemoSwitch.objects.update_or_create(name=FLAKY_SWITCH, defaults={"on": on})


class AsyncProbe:
    """What ``test.async_wait`` saw: how many ran at once, and on which threads."""

    def __init__(self) -> None:
        self.running = self.peak = 0
        self.threads: set[str] = set()


async_probe = AsyncProbe()


@handler("test.async_wait")
async def async_wait(data: Any, context: HandlerContext) -> Any:
    """An ``async def`` handler: waits ``data["seconds"]`` without a thread, counting overlap."""
    async_probe.running += 1
    async_probe.peak = max(async_probe.peak, async_probe.running)
    async_probe.threads.add(threading.current_thread().name)
    try:
        await asyncio.sleep(float(data.get("seconds", 0.2)))
    finally:
        async_probe.running -= 1
    if data.get("fail"):
        raise NonRetryable("asked to fail")
    return {"waited": data.get("seconds", 0.2), "key": context.idempotency_key}


class Hold:
    """What ``test.hold`` waits for: ``started`` is set when a step enters it, and it returns
    once ``release`` is set (or after 30 s, so a failing test cannot hang a thread)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def reset(self) -> Hold:
        self.started.clear()
        self.release.clear()
        return self


hold_gate = Hold()


@handler("test.hold")
def hold(data: Any, context: HandlerContext) -> Any:
    """Runs until the test releases it (``hold_gate``)."""
    hold_gate.started.set()
    hold_gate.release.wait(30)
    return {"attempt": context.attempt}
