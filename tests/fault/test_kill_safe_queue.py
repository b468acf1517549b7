"""django-q2's task queue and a worker SIGKILLed while it waits for a task (executions/worker/runtime.py)."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import queue
import signal
import time

import pytest
from django_q.queues import Queue

from executions.worker.runtime import KillSafeQueue

pytestmark = [pytest.mark.fault, pytest.mark.timeout(60)]


def kill_a_waiting_reader(tasks: Queue, is_waiting) -> None:
    """Start a process blocked in ``tasks.get()`` and SIGKILL it there."""
    reader = multiprocessing.get_context("fork").Process(target=tasks.get, daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while not is_waiting():
        assert time.monotonic() < deadline, "the reader never started waiting"
        time.sleep(0.01)
    os.kill(reader.pid, signal.SIGKILL)
    reader.join(timeout=10)


def test_a_reader_killed_while_waiting_does_not_wedge_the_kill_safe_queue():
    tasks = KillSafeQueue()

    def reader_holds_the_lock() -> bool:
        try:
            fcntl.lockf(tasks._reader_lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.lockf(tasks._reader_lock_file.fileno(), fcntl.LOCK_UN)
        return False

    kill_a_waiting_reader(tasks, reader_holds_the_lock)
    tasks.put({"func": "executions.worker.drain"})
    assert tasks.get(timeout=5) == {"func": "executions.worker.drain"}
    assert tasks.qsize() == 0
    with pytest.raises(queue.Empty):
        tasks.get(block=False)


def test_the_stock_queue_is_wedged_by_the_same_kill():
    """Why KillSafeQueue exists: the reader lock of django-q2's queue dies locked."""
    tasks = Queue()

    def reader_holds_the_lock() -> bool:
        if tasks._rlock.acquire(block=False):
            tasks._rlock.release()
            return False
        return True

    kill_a_waiting_reader(tasks, reader_holds_the_lock)
    tasks.put({"func": "executions.worker.drain"})
    with pytest.raises(queue.Empty):
        tasks.get(timeout=1)  # the task is there, but no reader can ever take the lock again


def test_the_cluster_builds_its_queues_kill_safe():
    import django_q.cluster

    assert django_q.cluster.Queue is KillSafeQueue
