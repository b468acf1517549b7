"""A claimed step as its vertex sees it (``StepRun``), and the fenced transaction a vertex
opens when it must write (SPAWNER, MERGE, CHAIN).

This module sits between the engine and the vertex modules: both import it, it imports
neither. The engine builds runs (engine.load_runs) and gives each the function that
commits an outcome inside a fenced transaction, so a vertex can finish its step atomically
with its own writes without importing the engine.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from executions.core import leases
from executions.core.leases import ClaimedStep
from executions.core.outcomes import Outcome
from executions.core.versions import LoadedVersion
from workflows.dsl import ast


class LeaseLost(Exception):
    """The step is no longer leased to this worker (expired, cancelled, or re-run)."""


@dataclass
class ExecutionInfo:
    id: uuid.UUID
    workspace_id: int
    workflow_id: int
    version_id: int
    parent_id: uuid.UUID | None
    root_id: uuid.UUID | None
    depth: int
    item_index: int | None
    spawned_by_id: int | None
    tags: str | None = None  # JSON text; its descendants inherit them (records.NewExecution)


# Commits outcomes of steps whose leases the caller's transaction has fenced already.
Committer = Callable[[Any, Sequence[tuple["StepRun", Outcome]]], object]


@dataclass
class StepRun:
    """A claimed step as its vertex sees it."""

    claimed: ClaimedStep
    execution: ExecutionInfo
    version: LoadedVersion
    vertex: ast.Vertex
    context: dict[str, Any]
    destination: dict[str, Any] | None
    commit_fenced: Committer
    output_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Set when its vertex moves the step out of RUNNING in its own fenced transaction: the
    # lease then ends with a result, not lost (the drain's heartbeat must not take it so).
    finished_itself: bool = False

    @property
    def step_id(self) -> int:
        return self.claimed.step_id

    @property
    def attempt(self) -> int:
        return self.claimed.attempt

    @property
    def state(self) -> dict[str, Any]:
        return self.claimed.state

    @property
    def db_now(self) -> datetime:
        return self.claimed.claimed_at

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts and redeliveries: forward it to destinations (S5)."""
        return f"sb:{self.execution.id}:{self.vertex.id}"

    @contextlib.contextmanager
    def transaction(self, prelock: tuple[str, dict[str, Any]] | None = None) -> Iterator[FencedTransaction]:
        """A transaction in which this step is verified to still be ours (raises LeaseLost
        otherwise) and its lease is renewed. ``prelock`` runs first, for rows that the lock
        order puts before a step (a MERGE locks its fan-out row)."""
        with transaction.atomic(), connection.cursor() as cursor:
            if prelock:
                cursor.execute(*prelock)
            if not leases.heartbeat(cursor, [self.claimed.lease]):
                raise LeaseLost(f"step {self.step_id} is no longer leased to this worker")
            yield FencedTransaction(cursor, self)


@dataclass
class FencedTransaction:
    cursor: Any
    run: StepRun
    finished: bool = False

    def finish(self, outcome: Outcome) -> None:
        """Commit the step's outcome inside this transaction (the vertex then returns
        ``outcomes.committed()``)."""
        self.run.commit_fenced(self.cursor, [(self.run, outcome)])
        self.finished = self.run.finished_itself = True
