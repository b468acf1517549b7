"""The ``demo.*`` TASK handlers, for the demo, the tests and the benchmarks — and
``demo.crash_if``, a fault-injection handler that SIGKILLs its worker. Registered when the
demo app loads (``SB_DEMO=1``); production workers never have them, so a workflow naming
one is refused at publish time like any unknown handler."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from typing import Any

from executions.handlers import HandlerContext, NonRetryable, handler
from executions.models import Execution
from executions.services import waits


@handler("demo.echo")
def echo(data: Any, context: HandlerContext) -> Any:
    """Returns its input."""
    return data


@handler("demo.noop")
def noop(data: Any, context: HandlerContext) -> None:
    """Does nothing and returns nothing (the cheapest possible child, for benchmarks)."""
    return None


@handler("demo.fail_if")
def fail_if(data: Any, context: HandlerContext) -> Any:
    """Fails (retryably) when the input has ``"fail": true``; otherwise echoes it."""
    if isinstance(data, dict) and data.get("fail") is True:
        raise RuntimeError(str(data.get("message") or "failed on purpose (input has fail=true)"))
    return data


@handler("demo.sleep")
def sleep(data: Any, context: HandlerContext) -> Any:
    """Works for ``seconds`` (default 1) and then echoes its input."""
    seconds = float(data.get("seconds", 1)) if isinstance(data, dict) else 1.0
    time.sleep(max(0.0, min(seconds, 3600.0)))
    return data


@handler("demo.crash_if")
def crash_if(data: Any, context: HandlerContext) -> Any:
    """A fault-injection handler. With ``"crash": true`` in its input it SIGKILLs the worker
    process running it — on every attempt, so the step is a poison pill that the reaper fails
    after its ``maxAttempts``. Otherwise it works for ``seconds`` (default 0) and returns the
    attempt and the worker (``host:pid``) that ran it, which makes re-runs visible."""
    if isinstance(data, dict) and data.get("crash") is True:
        if multiprocessing.current_process().name == "MainProcess":
            # Only a worker subprocess may die: never a web server, a command or a test runner.
            raise NonRetryable("demo.crash_if kills only worker subprocesses (this is a main process)")
        os.kill(os.getpid(), signal.SIGKILL)
    seconds = float(data.get("seconds", 0)) if isinstance(data, dict) else 0.0
    if seconds > 0:
        time.sleep(min(seconds, 3600.0))
    return {"attempt": context.attempt, "worker": f"{socket.gethostname()}:{os.getpid()}"}


@handler("demo.announce_ready")
def announce_ready(data: Any, context: HandlerContext) -> Any:
    """The demo's deployment system says a rollout is ready: it posts ``deployment.ready``
    (``{"deploymentId", "url"}``) to the execution's workspace, once per deployment however
    often this step runs (the event's id)."""
    if not isinstance(data, dict) or not isinstance(data.get("deploymentId"), str):
        raise NonRetryable("demo.announce_ready needs {\"deploymentId\": \"…\"}")
    deployment = data["deploymentId"]
    workspace_id = Execution.objects.filter(pk=context.execution_id).values_list("workspace_id", flat=True).get()
    event = {"deploymentId": deployment, "url": f"https://{deployment}.demo.invalid/"}
    delivered = waits.post_event(workspace_id, "deployment.ready", event, key=f"demo-ready:{deployment}")
    return {**event, "delivered": delivered}
