"""Concurrency in integration tests: real threads, each with its own database connection,
released at once and bounded by timeouts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def race(*work: Callable[[], Any], timeout: float = 60.0) -> list[Any]:
    """Run each callable in a thread of its own, all released together by a barrier; each
    thread closes its database connection when done. Returns what each returned, in the order
    given. Raises the first exception a thread raised (its own errors are the test's), and
    fails if a thread is still running after ``timeout`` seconds."""
    barrier = threading.Barrier(len(work), timeout=20)
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def run(index: int, function: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = function()
        except BaseException as error:  # handed to the test's thread below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, function)) for index, function in enumerate(work)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    if errors:
        raise errors[0]
    running = sum(thread.is_alive() for thread in threads)
    assert running == 0, f"{running} of {len(threads)} racing threads still running after {timeout:g}s"
    return results
