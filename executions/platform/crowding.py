"""Whether other work waits for a thread of the pool the calling step runs on (issue 30).

The fair claim divides *claims* by workspace and root, but a drain runs what it claimed on a
fixed pool of threads, first come first served: a step that holds its thread for long — a
SPAWNER spawns for up to ``SPAWN_SLICE_SECONDS`` — keeps the steps claimed after it waiting,
however fairly they were claimed (`bench fairness --sybil`: fifty of one workspace's spawners
held every thread while another workspace's claimed steps queued). So a long step asks, between
its units of work, whether steps of *another* root wait for a thread of its pool, and hands its
thread back if so (fanout/spawn.py); back in READY, it is claimed again by the fair claim, with
every other flow. Its own root's steps (its children) do not count: they are its own work.

A pool thread registers how its pool answers (``serve``); a thread of no pool (inline drains,
tests, the web) always hears no.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

_local = threading.local()


def serve(waiting: Callable[[uuid.UUID | None], bool]) -> None:
    """Called once by each pool thread: ``waiting(root)`` says whether steps of a root other than
    ``root`` wait for one of the pool's threads."""
    _local.waiting = waiting


def others_waiting(root: uuid.UUID | None) -> bool:
    """Whether steps of another root than ``root`` wait for a thread of the caller's pool."""
    waiting = getattr(_local, "waiting", None)
    return bool(waiting is not None and waiting(root))
