"""Where steps run: an event loop for the ones that wait on the network, a pool of daemon
threads for the rest, or the caller's own thread (tests, debugging)."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import Counter
from contextlib import suppress
from typing import Any

from django import db

from executions.destinations import outbound
from executions.platform import crowding
from executions.worker.futures import AnyFuture, StepFuture, settle

log = logging.getLogger(__name__)


class StepLoop:
    """An asyncio event loop on a daemon thread of its own, for the steps that wait on the
    network (HTTP steps, ``async def`` handlers): one thread keeps hundreds of them in flight.
    Nothing on it touches the database (Django's connections are per thread and blocking):
    steps arrive loaded, their results go back through futures, and the drain's thread
    commits them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._pending: list[tuple[Any, AnyFuture]] = []  # started from other threads, no task yet
        self._pending_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="sb-step-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self, coroutine: Any, future: AnyFuture) -> None:
        """Run ``coroutine`` on the loop, its result or exception settling ``future``; a
        cancelled ``future`` cancels it. Called on the loop's own thread (a call ended and its
        slot's next step starts), the task is created directly — the next turn of the loop.
        From another thread (the drain's, starting the steps it claimed), starts are batched:
        the first of a batch wakes the loop once (``call_soon_threadsafe``) and the loop
        creates every task that arrived meanwhile — not ``run_coroutine_threadsafe`` per
        step, whose wake-up, extra future and chained callbacks cost the loop a tenth of its
        time at a limit of 256 (docs/performance-log.md, "Seventh pass")."""
        if threading.current_thread() is self.thread:
            self._create(coroutine, future)
            return
        with self._pending_lock:
            self._pending.append((coroutine, future))
            wake = len(self._pending) == 1  # else a wake-up is on its way and takes this one too
        if wake:
            try:
                self.loop.call_soon_threadsafe(self._start_pending)
            except RuntimeError:
                # The loop has closed (the drain is ending): this step never starts. Its caller
                # gets the error, as from run_coroutine_threadsafe, and its lease is reaped.
                with self._pending_lock:
                    self._pending.clear()
                raise

    def _start_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for coroutine, future in pending:
            self._create(coroutine, future)

    def _create(self, coroutine: Any, future: AnyFuture) -> None:
        if future.cancelled():  # cancelled before it started (a shutdown, a timeout)
            coroutine.close()
            return
        task = self.loop.create_task(coroutine)
        task.add_done_callback(lambda done: settle(future, done.result))

        def cancel() -> None:
            with suppress(RuntimeError):  # the loop has closed: nothing runs any more
                self.loop.call_soon_threadsafe(task.cancel)

        future.add_done_callback(lambda done: cancel() if done.cancelled() else None)

    def shutdown(self) -> None:
        """Cancel what still runs (results after a drain ends are fenced off anyway), close
        the outbound clients, stop the loop."""
        async def close() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await outbound.close_async_clients()

        try:
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=5)
        except Exception:
            log.warning("the step loop did not close cleanly", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class StepPool:
    """A fixed pool of *daemon* threads running steps. Not ThreadPoolExecutor: its threads
    are joined at interpreter exit, so one handler still running after its step timed out
    or was released at shutdown would keep a stopping worker process alive."""

    def __init__(self, threads: int) -> None:
        self.queue: queue.SimpleQueue[tuple[StepFuture, Any, tuple[Any, ...], Any] | None] = queue.SimpleQueue()
        # Queued steps per root (``owner`` of submit), for platform/crowding.py: a long step
        # hands its thread back when another root's steps wait for one.
        self.queued: Counter[Any] = Counter()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, name=f"sb-step-{i}", daemon=True) for i in range(threads)]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Any, *args: Any, owner: Any = None) -> StepFuture:
        future = StepFuture()
        with self.lock:
            self.queued[owner] += 1
        self.queue.put((future, fn, args, owner))
        return future

    def others_waiting(self, owner: Any) -> bool:
        """Whether steps of another owner (root) than ``owner`` wait for a thread."""
        with self.lock:
            return sum(self.queued.values()) > self.queued[owner]

    def _work(self) -> None:
        crowding.serve(self.others_waiting)
        try:
            while (item := self.queue.get()) is not None:
                future, fn, args, owner = item
                with self.lock:
                    self.queued[owner] -= 1
                    if self.queued[owner] <= 0:
                        del self.queued[owner]
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(*args))
                except BaseException as error:
                    future.set_exception(error)
        finally:
            # A step thread's database connection is its own (Django's are per thread):
            # close it with the thread, or every drain would leave its pool's sessions open.
            db.connections.close_all()

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        while cancel_futures:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self.threads:
            self.queue.put(None)


class InlineExecutor:
    """A ThreadPoolExecutor look-alike that runs each call at once on the caller's thread."""

    def submit(self, fn: Any, *args: Any, owner: Any = None) -> StepFuture:
        future = StepFuture()
        try:
            future.set_result(fn(*args))
        except BaseException as error:
            future.set_exception(error)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None
