"""The drain's event loop (pools.StepLoop): steps started from the drain's thread while the
loop is busy all run, in order, and each settles its own future; a future cancelled before
its task exists never runs, and cancelling a running one cancels its task."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import CancelledError, Future

import pytest

from executions.worker.pools import StepLoop


@pytest.fixture
def step_loop():
    loop = StepLoop()
    yield loop
    loop.shutdown()


def block(step_loop: StepLoop) -> threading.Event:
    """Keep the loop busy until the returned event is set (so starts pile up)."""
    release, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(5)

    step_loop.loop.call_soon_threadsafe(hold)
    assert busy.wait(5)
    return release


def test_starts_made_while_the_loop_is_busy_all_run_in_order_and_each_settles_its_own_future(step_loop):
    ran: list[int] = []
    release = block(step_loop)

    async def double(n: int) -> int:
        ran.append(n)
        await asyncio.sleep(0)
        return 2 * n

    futures = [Future() for _ in range(10)]
    for n, future in enumerate(futures):
        step_loop.start(double(n), future)
    assert not any(future.done() for future in futures), "the loop is busy: nothing ran yet"
    release.set()
    assert [future.result(timeout=5) for future in futures] == [2 * n for n in range(10)]
    assert ran == list(range(10)), "started in the order they were handed over"
    step_loop.start(double(21), after := Future())
    assert after.result(timeout=5) == 42, "a start after the batch was taken runs too"


def test_an_exception_settles_the_future(step_loop):
    async def fail() -> None:
        raise ValueError("boom")

    step_loop.start(fail(), future := Future())
    with pytest.raises(ValueError, match="boom"):
        future.result(timeout=5)


def test_a_future_cancelled_before_its_task_exists_never_runs(step_loop):
    ran = threading.Event()

    async def step() -> None:
        ran.set()

    release = block(step_loop)
    future: Future[None] = Future()
    step_loop.start(step(), future)
    assert future.cancel()
    release.set()
    step_loop.start(asyncio.sleep(0), later := Future())  # the loop has run the batch by now
    later.result(timeout=5)
    assert not ran.is_set()


def test_cancelling_a_running_step_cancels_its_task(step_loop):
    started, cancelled = threading.Event(), threading.Event()

    async def step() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future: Future[None] = Future()
    step_loop.start(step(), future)
    assert started.wait(5)
    assert future.cancel()
    assert cancelled.wait(5)
    with pytest.raises(CancelledError):
        future.result(timeout=0)
