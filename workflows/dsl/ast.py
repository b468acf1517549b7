"""The typed workflow AST. Every optional field holds its value or its default, so the AST
of a document written with defaults omitted equals the AST of the same document written
with them explicit; ``to_dict`` gives the canonical (camelCase, all fields) form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

TERMINAL_FAILURE_STATUSES = ("CANCELLED", "FAILED")
DEFAULT_TIMEOUT_SECONDS = 300.0


DEFAULT_MAX_BACKOFF_SECONDS = 3600.0


@dataclass(frozen=True)
class Retry:
    max_attempts: int = 3
    backoff_seconds: float = 1.0
    backoff_multiplier: float = 2.0
    jitter: float = 0.0
    max_backoff_seconds: float = DEFAULT_MAX_BACKOFF_SECONDS

    def to_dict(self) -> dict[str, Any]:
        canonical: dict[str, Any] = {
            "maxAttempts": self.max_attempts,
            "backoffSeconds": self.backoff_seconds,
            "backoffMultiplier": self.backoff_multiplier,
            "jitter": self.jitter,
        }
        # Added after versions were published: present only when not the default, so every
        # existing document keeps its hash (tests/fixtures/dsl_hashes.json).
        if self.max_backoff_seconds != DEFAULT_MAX_BACKOFF_SECONDS:
            canonical["maxBackoffSeconds"] = self.max_backoff_seconds
        return canonical

    def delay(self, attempt: int, random_unit: float = 0.5) -> float:
        """Seconds to wait before attempt ``attempt + 1`` of a round (``random_unit`` in
        [0, 1)): ``backoffSeconds × backoffMultiplier^(attempt − 1)`` with jitter, never more
        than ``maxBackoffSeconds``. Computed in logarithms, so no exponent overflows."""
        cap = self.max_backoff_seconds
        exponent = max(attempt - 1, 0)
        if self.backoff_seconds <= 0:
            return 0.0
        if self.backoff_multiplier > 1 and (
                exponent * math.log(self.backoff_multiplier) > math.log(cap / self.backoff_seconds) + 1):
            base = cap * 2  # beyond the cap even at the lowest jitter: the cap applies
        else:
            base = self.backoff_seconds * self.backoff_multiplier ** exponent
        return min(cap, max(0.0, base * (1 + self.jitter * (2 * random_unit - 1))))


@dataclass(frozen=True)
class Vertex:
    id: str
    next: str | None = None

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "next": self.next, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {}

    def successors(self) -> list[str]:
        return [self.next] if self.next else []


@dataclass(frozen=True)
class WorkVertex(Vertex):
    """A vertex that does work and may be retried and timed out."""

    retry: Retry = field(default_factory=Retry)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry": self.retry.to_dict(), "timeoutSeconds": self.timeout_seconds}

    @property
    def destination_name(self) -> str | None:
        return None


@dataclass(frozen=True)
class Task(WorkVertex):
    handler: str = ""
    input: Any = "$.input"
    destination: str | None = None
    type: ClassVar[str] = "TASK"

    def _fields(self) -> dict[str, Any]:
        return {"handler": self.handler, "input": self.input, "destination": self.destination}

    @property
    def destination_name(self) -> str | None:
        return self.destination


@dataclass(frozen=True)
class CallbackWait:
    """How long a step waits for its callback (``WAIT`` ``"for": "callback"``, or an HTTP
    vertex's ``waitForCallback``), and how often the caller must show it is still alive."""

    timeout_seconds: float = 0.0
    heartbeat_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"timeoutSeconds": self.timeout_seconds, "heartbeatSeconds": self.heartbeat_seconds}


@dataclass(frozen=True)
class Http(WorkVertex):
    destination: str = ""
    method: str = "POST"
    path: str = "/"
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    wait_for_callback: CallbackWait | None = None
    type: ClassVar[str] = "HTTP"

    def _fields(self) -> dict[str, Any]:
        canonical: dict[str, Any] = {
            "destination": self.destination,
            "method": self.method,
            "path": self.path,
            "body": self.body,
            "headers": dict(self.headers),
        }
        # Added after versions were published: present only when set, so every existing
        # document keeps its hash (tests/fixtures/dsl_hashes.json).
        if self.wait_for_callback is not None:
            canonical["waitForCallback"] = self.wait_for_callback.to_dict()
        return canonical

    @property
    def destination_name(self) -> str | None:
        return self.destination


@dataclass(frozen=True)
class Spawner(WorkVertex):
    items: str = ""
    workflow: str | None = None
    version: str | None = None
    item_input: Any = "$.item"
    items_per_child: int = 1
    max_concurrency: int | None = None
    item_key: str | None = None  # a path into the item ($.item.id): each child's business key
    type: ClassVar[str] = "SPAWNER"

    def _fields(self) -> dict[str, Any]:
        canonical: dict[str, Any] = {
            "items": self.items,
            "workflow": self.workflow,
            "version": self.version,
            "itemInput": self.item_input,
        }
        # Added after versions were published: present only when not the default, so every
        # existing document keeps its hash (tests/fixtures/dsl_hashes.json).
        if self.items_per_child != 1:
            canonical["itemsPerChild"] = self.items_per_child
        if self.max_concurrency is not None:
            canonical["maxConcurrency"] = self.max_concurrency
        if self.item_key is not None:
            canonical["itemKey"] = self.item_key
        return canonical


@dataclass(frozen=True)
class Merge(Vertex):
    spawner: str = ""
    tolerate_child_failures: tuple[str, ...] = ()
    max_failure_ratio: float = 1.0
    max_failures: int | None = None  # failureTolerance.maxFailures (issue 31); None: no count
    fail_fast: bool = False
    # A quorum (S26): at most one of the two. Absent from the canonical form when unset, so a
    # document without one keeps its hash.
    min_successful: int | None = None
    min_successful_ratio: float | None = None
    type: ClassVar[str] = "MERGE"

    def _fields(self) -> dict[str, Any]:
        tolerance: dict[str, Any] = {"maxFailureRatio": self.max_failure_ratio}
        if self.max_failures is not None:  # added later: present only when set, so old hashes stay
            tolerance["maxFailures"] = self.max_failures
        config: dict[str, Any] = {
            "tolerateChildFailures": list(self.tolerate_child_failures),
            "failureTolerance": tolerance,
            "failFast": self.fail_fast,
        }
        if self.min_successful is not None:
            config["minSuccessful"] = self.min_successful
        if self.min_successful_ratio is not None:
            config["minSuccessfulRatio"] = self.min_successful_ratio
        return {"spawner": self.spawner, "config": config}

    @property
    def quorum(self) -> bool:
        return self.min_successful is not None or self.min_successful_ratio is not None


@dataclass(frozen=True)
class Timer(Vertex):
    seconds: float | None = None
    until: str | None = None
    type: ClassVar[str] = "TIMER"

    def _fields(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "until": self.until}


@dataclass(frozen=True)
class Wait(WorkVertex):
    """WAIT: the step waits — holding no worker — for a callback or an event (S27).

    ``timeout_seconds`` is the wait's bound (required in the DSL); ``match`` pairs a path
    into the event's data with a path into the execution context."""

    for_: str = "callback"  # callback | event
    heartbeat_seconds: float | None = None
    event: str | None = None
    match: tuple[tuple[str, str], ...] = ()
    lookback_seconds: float = 0.0
    type: ClassVar[str] = "WAIT"

    def _fields(self) -> dict[str, Any]:
        if self.for_ == "callback":
            return {"for": self.for_, "heartbeatSeconds": self.heartbeat_seconds}
        return {"for": self.for_, "event": self.event, "match": dict(self.match),
                "lookbackSeconds": self.lookback_seconds}

    @property
    def callback(self) -> CallbackWait:
        return CallbackWait(self.timeout_seconds, self.heartbeat_seconds)


@dataclass(frozen=True)
class ChoiceRule:
    when: dict[str, Any]
    next: str

    def to_dict(self) -> dict[str, Any]:
        return {"when": self.when, "next": self.next}


@dataclass(frozen=True)
class Choice(Vertex):
    choices: tuple[ChoiceRule, ...] = ()
    default: str | None = None
    type: ClassVar[str] = "CHOICE"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "choices": [c.to_dict() for c in self.choices], "default": self.default}

    def successors(self) -> list[str]:
        return [c.next for c in self.choices] + ([self.default] if self.default else [])


@dataclass(frozen=True)
class Chain(WorkVertex):
    workflow: str = "self"
    input: Any = "$.input"
    type: ClassVar[str] = "CHAIN"

    def _fields(self) -> dict[str, Any]:
        return {"workflow": self.workflow, "input": self.input}


@dataclass(frozen=True)
class Succeed(Vertex):
    output: Any = None
    type: ClassVar[str] = "SUCCEED"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "output": self.output}


@dataclass(frozen=True)
class Fail(Vertex):
    error: str = "failed"
    cause: str | None = None
    type: ClassVar[str] = "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "error": self.error, "cause": self.cause}


VERTEX_TYPES: dict[str, type[Vertex]] = {
    cls.type: cls for cls in (Task, Http, Spawner, Merge, Timer, Wait, Choice, Chain, Succeed, Fail)
}


@dataclass(frozen=True)
class Workflow:
    start: str
    vertices: dict[str, Vertex]

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "vertices": {vid: v.to_dict() for vid, v in self.vertices.items()}}

    def vertex(self, vertex_id: str) -> Vertex:
        return self.vertices[vertex_id]

    def merge_for(self, spawner_id: str) -> Merge | None:
        for vertex in self.vertices.values():
            if isinstance(vertex, Merge) and vertex.spawner == spawner_id:
                return vertex
        return None
