"""TASK handlers used only by in-process tests (a qcluster subprocess does not load them)."""

from __future__ import annotations

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
