"""Retry policy of a step: how many attempts it has and how long it waits between them.

Work vertices (TASK, HTTP, SPAWNER, CHAIN) carry a ``retry`` policy in the DSL. Vertices
without one (MERGE, TIMER, CHOICE, SUCCEED, FAIL) run no user code and are safe to run
again; they lose their worker like any step (kill -9, a database restart) and must not
fail their execution for it, so they get ``INTERNAL_MAX_ATTEMPTS``. The bound still ends
one that crashes every time (the reaper fails it, leases.py).
"""

from __future__ import annotations

import random

from workflows.dsl import ast

INTERNAL_MAX_ATTEMPTS = 5


def max_attempts(vertex: ast.Vertex) -> int:
    """The attempts one round of the vertex's policy grants."""
    return vertex.retry.max_attempts if isinstance(vertex, ast.WorkVertex) else INTERNAL_MAX_ATTEMPTS


def round_attempt(vertex: ast.Vertex, attempt: int, step_max_attempts: int) -> int:
    """Which attempt of its current round ``attempt`` is. A step's rounds: its first, then one
    per operator retry, each granting ``max_attempts(vertex)`` attempts (so the step's
    ``max_attempts`` is where the current round ends)."""
    return max(1, attempt - (step_max_attempts - max_attempts(vertex)))


def delay(vertex: ast.Vertex, attempt: int, step_max_attempts: int) -> float:
    """Seconds to wait after ``attempt`` failed: the policy's backoff counted from the start
    of the current round, capped by ``maxBackoffSeconds``, with jitter (0 without a policy)."""
    if not isinstance(vertex, ast.WorkVertex):
        return 0.0
    in_round = round_attempt(vertex, attempt, step_max_attempts)
    return vertex.retry.delay(in_round, random.random())  # noqa: S311 - jitter, not security
