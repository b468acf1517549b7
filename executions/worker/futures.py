"""The future of one step in flight, and how a runner settles it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, InvalidStateError
from contextlib import suppress
from typing import Any

log = logging.getLogger(__name__)


class StepFuture:
    """The result of one step in flight: ``concurrent.futures.Future``'s protocol (result,
    exception, cancel, done-callbacks; ``InvalidStateError`` when settled twice), on a plain
    lock. The standard future builds a ``threading.Condition`` (with its own re-entrant lock)
    for every step, and takes it for each callback and result: a tenth of a drain thread's
    interpreter time at a limit of 256 (docs/performance-log.md, "Eighth pass"). Only ``result``
    on a future that has not settled waits, on an event made for that wait alone."""

    __slots__ = ("_callbacks", "_exception", "_lock", "_result", "_state", "_waiter")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[StepFuture], object]] = []
        self._waiter: threading.Event | None = None

    def __repr__(self) -> str:
        return f"<StepFuture {self._state}>"

    def done(self) -> bool:
        return self._state in (_CANCELLED, _FINISHED)

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def running(self) -> bool:
        return self._state == _RUNNING

    def cancel(self) -> bool:
        """Cancel unless running or settled (True if it is cancelled now)."""
        with self._lock:
            if self._state in (_RUNNING, _FINISHED):
                return False
            if self._state == _CANCELLED:
                return True
            self._state = _CANCELLED
        self._settled()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        """For a pool thread about to run the step: False if it was cancelled meanwhile."""
        with self._lock:
            if self._state == _CANCELLED:
                return False
            if self._state != _PENDING:
                raise InvalidStateError(f"{self!r} is not pending")
            self._state = _RUNNING
            return True

    def set_result(self, result: Any) -> None:
        self._settle(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._settle(None, exception)

    def _settle(self, result: Any, exception: BaseException | None) -> None:
        with self._lock:
            if self._state in (_CANCELLED, _FINISHED):
                raise InvalidStateError(f"{self!r} is settled already")
            self._result, self._exception, self._state = result, exception, _FINISHED
        self._settled()

    def _settled(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
            if self._waiter is not None:
                self._waiter.set()
        for callback in callbacks:
            self._call(callback)

    def _call(self, callback: Callable[[StepFuture], object]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("a step future's done-callback %r raised", callback)

    def add_done_callback(self, callback: Callable[[StepFuture], object]) -> None:
        """Call ``callback(self)`` once it settles: now, on this thread, if it has."""
        with self._lock:
            if self._state not in (_CANCELLED, _FINISHED):
                self._callbacks.append(callback)
                return
        self._call(callback)

    def _wait(self, timeout: float | None) -> None:
        with self._lock:
            if self._state in (_CANCELLED, _FINISHED):
                return
            waiter = self._waiter = self._waiter or threading.Event()
        if not waiter.wait(timeout):
            raise TimeoutError(f"{self!r} did not settle within {timeout}s")

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._state == _CANCELLED:
            raise CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        if self._state == _CANCELLED:
            raise CancelledError()
        return self._exception


_PENDING, _RUNNING, _CANCELLED, _FINISHED = "PENDING", "RUNNING", "CANCELLED", "FINISHED"
AnyFuture = Future[Any] | StepFuture  # the step loop settles either (tests hand it plain futures)


def settle(future: AnyFuture, fn: Callable[[], Any]) -> None:
    """Set ``future`` from ``fn()`` (its result or its exception) unless it was cancelled."""
    try:
        result = fn()
    except BaseException as error:  # handed to whoever waits on the future
        with suppress(InvalidStateError):
            future.set_exception(error)
    else:
        with suppress(InvalidStateError):
            future.set_result(result)
