"""What a vertex returns for a claimed step. The engine turns outcomes into transitions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

NO_OUTPUT: Any = object()  # the step stores no output payload


@dataclass
class Outcome:
    kind: str  # succeeded | failed | wait | signal | await | committed
    output: Any = NO_OUTPUT
    next: str | None = None  # for succeeded: the vertex to continue with (None: vertex.next)
    end: str | None = None  # for succeeded: end the execution with this status
    output_vertex: str | None = None  # for an end: whose output is the execution's output
    error: str = ""
    retryable: bool = True
    due_at: datetime | None = None
    due_in: float | None = None
    reason: str = ""
    state: dict[str, Any] | None = None
    wait: Any = None  # for await: the wait to register with the transition (core/waits.WaitSpec)
    throttled: bool = False  # for wait: a throttled answer's (counts against max_throttled_waits)


def succeeded(output: Any = NO_OUTPUT, *, next: str | None = None, end: str | None = None,
              output_vertex: str | None = None, error: str = "") -> Outcome:
    """Done. Continue with ``next`` (default: the vertex's ``next``), or end the execution
    (``end`` = SUCCEEDED or FAILED; no next vertex means SUCCEEDED)."""
    return Outcome("succeeded", output=output, next=next, end=end, output_vertex=output_vertex, error=error)


def failed(error: str, *, retryable: bool = True) -> Outcome:
    return Outcome("failed", error=error, retryable=retryable)


def wait(*, reason: str, due_at: datetime | None = None, seconds: float | None = None,
         state: dict[str, Any] | None = None) -> Outcome:
    """Back to READY until a due time (a timer, a deferral); consumes no attempt."""
    return Outcome("wait", reason=reason, due_at=due_at, due_in=seconds, state=state)


def signal(reason: str, state: dict[str, Any] | None = None) -> Outcome:
    """WAITING until another transition wakes the step (a merge waiting for children)."""
    return Outcome("signal", reason=reason, state=state)


def awaiting(*, reason: str, due_at: datetime | None = None, wait: Any = None) -> Outcome:
    """WAITING for the outside world (a callback, an event) until its wait times out
    (core/waits.py), holding no lease and no slot: a wait registered already (``due_at``), or
    one the commit registers with the transition (``wait``, a waits.WaitSpec)."""
    return Outcome("await", reason=reason, due_at=due_at, wait=wait)


def committed() -> Outcome:
    """The vertex already committed its own outcome inside its fenced transaction."""
    return Outcome("committed")
