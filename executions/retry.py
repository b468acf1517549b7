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


def delay(vertex: ast.Vertex, attempt: int) -> float:
    """Seconds to wait after ``attempt`` failed, with jitter (0 for vertices without a policy)."""
    if not isinstance(vertex, ast.WorkVertex):
        return 0.0
    return vertex.retry.delay(attempt, random.random())  # noqa: S311 - jitter, not security
