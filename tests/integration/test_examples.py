"""The example handler package in ``examples/`` (issue 16 §1), used as a deployment would:
named by SB_HANDLER_MODULES, imported by the start-up loader, its workflow published, the
sync handler run by the engine, and the async one calling a loopback API."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from executions.handlers import HandlerContext, NonRetryable, registry
from executions.selectors import payloads as payload_reads
from tests.support.helpers import publish, refresh, run_engine, start, step
from tests.support.httpserver import serve
from workflows.handler_modules import load_handler_modules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODULE = "schemabridge_example.handlers"


@pytest.fixture
def example_handlers() -> Iterator[Any]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        with override_settings(SB_HANDLER_MODULES=[MODULE]):
            assert MODULE in load_handler_modules()
        yield sys.modules[MODULE]
    finally:
        sys.path.remove(str(EXAMPLES))


def test_the_example_package_registers_its_handlers(example_handlers: Any) -> None:
    assert registry["example.greet"] is example_handlers.greet
    assert registry["example.notify"] is example_handlers.notify
    assert asyncio.iscoroutinefunction(registry["example.notify"])


@pytest.mark.django_db
def test_the_example_workflow_publishes_and_the_sync_handler_runs_on_the_engine(
        example_handlers: Any, workspace: Any) -> None:
    doc = json.loads((EXAMPLES / "workflows" / "greet_and_notify.json").read_text())
    publish(workspace, "greet-and-notify", doc)  # publish-time validation knows both handlers
    publish(workspace, "greet", {"start": "greet", "vertices": {"greet": doc["vertices"]["greet"] | {"next": None}}})
    execution = start(workspace, "greet", {"name": " Ada "})
    run_engine()
    assert refresh(execution).status == "SUCCEEDED"
    assert step(execution, "greet").status == "SUCCEEDED"
    assert payload_reads.output_of(refresh(execution)) == {"greeting": "Hello, Ada!"}


@pytest.mark.django_db
def test_the_sync_handler_refuses_a_bad_input_without_retrying(example_handlers: Any, workspace: Any) -> None:
    publish(workspace, "greet", {"start": "greet", "vertices": {"greet": {"type": "TASK", "handler": "example.greet",
                                                                          "retry": {"maxAttempts": 3}}}})
    execution = start(workspace, "greet", {"name": ""})
    run_engine()
    failed = step(execution, "greet")
    assert (refresh(execution).status, failed.status, failed.attempt) == ("FAILED", "FAILED", 1)
    assert "needs" in failed.error


def test_the_async_handler_posts_with_the_steps_idempotency_key(example_handlers: Any) -> None:
    context = HandlerContext(execution_id="e-1", vertex="notify", attempt=2, idempotency_key="sb:e-1:notify")
    with serve() as (base, recorder):
        output = asyncio.run(example_handlers.notify({"url": f"{base}/ok", "message": "Hello"}, context))
        with pytest.raises(NonRetryable, match="HTTP 404"):
            asyncio.run(example_handlers.notify({"url": f"{base}/missing", "message": "x"}, context))
    assert output == {"status": 200, "idempotencyKey": "sb:e-1:notify"}
    first = recorder.requests[0]
    assert (first["method"], first["path"]) == ("POST", "/ok")
    assert first["headers"]["Idempotency-Key"] == "sb:e-1:notify"
    assert json.loads(first["body"]) == {"message": "Hello"}
