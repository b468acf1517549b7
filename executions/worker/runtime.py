"""Hardening of the django-q2 worker runtime against SIGKILLed worker processes.

django-q2's sentinel hands tasks to its worker processes through a ``multiprocessing``
queue. An idle worker waits in ``Queue.get()`` *holding the queue's reader lock* (a
semaphore) until a task arrives; a worker killed there (kill -9, the OOM killer) never
releases it, so every other worker — and every replacement the sentinel starts — blocks on
that lock forever: the cluster takes no task again, and no drain runs. (Seen here: SIGKILL
two idle workers, then start a fan-out; nothing ever runs.)

``KillSafeQueue`` replaces that reader lock with a POSIX record lock (``lockf``) on an
unlinked temporary file, which the kernel releases when its holding process dies, plus a
thread lock for threads of one process (record locks belong to processes). What is left is
a window of microseconds (a kill between reading a message's header and its body); the
hours a worker may spend idle in ``get()`` are safe. ``install()`` makes django-q's cluster
use it; it runs when the executions app is ready, before ``qcluster`` builds its queues.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

from django_q.queues import Queue


class KillSafeQueue(Queue):
    """django-q2's queue whose readers exclude each other with a lock that dies with its holder."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Unlinked at once: forked processes inherit the descriptor, and each takes its own
        # record lock on it (record locks are per process and not inherited through fork).
        self._reader_lock_file = tempfile.TemporaryFile(prefix="sb-queue-")  # noqa: SIM115 - lives with the queue
        weakref.finalize(self, self._reader_lock_file.close)
        self._thread_locks: dict[int, threading.Lock] = {}

    def _thread_lock(self) -> threading.Lock:
        pid = os.getpid()
        if pid not in self._thread_locks:
            self._thread_locks[pid] = threading.Lock()
        return self._thread_locks[pid]

    @contextlib.contextmanager
    def _reading(self, block: bool, deadline: float | None) -> Iterator[None]:
        lock = self._thread_lock()
        if not (lock.acquire(timeout=max(0.0, deadline - time.monotonic())) if deadline is not None
                else lock.acquire(block)):
            raise queue.Empty
        try:
            self._lock_file(block, deadline)
            try:
                yield
            finally:
                fcntl.lockf(self._reader_lock_file.fileno(), fcntl.LOCK_UN)
        finally:
            lock.release()

    def _lock_file(self, block: bool, deadline: float | None) -> None:
        fd = self._reader_lock_file.fileno()
        if block and deadline is None:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            return
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if deadline is None or time.monotonic() >= deadline:
                    raise queue.Empty from None
                time.sleep(0.01)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        # The body of multiprocessing.queues.Queue.get (Python 3.11) with the reader lock
        # swapped, plus django-q's size counter.
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        deadline = time.monotonic() + max(timeout, 0.0) if block and timeout is not None else None
        with self._reading(block, deadline):
            if not (block and deadline is None):
                remaining = max(0.0, deadline - time.monotonic()) if deadline is not None else 0.0
                if not self._poll(remaining):
                    raise queue.Empty
            data = self._recv_bytes()
            self._sem.release()
        self.size.increment(-1)
        return ForkingPickler.loads(data)


def install() -> None:
    """Make django-q2's cluster build its task and result queues as ``KillSafeQueue``."""
    import django_q.cluster

    django_q.cluster.Queue = KillSafeQueue
