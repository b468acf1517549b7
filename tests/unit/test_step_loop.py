"""The drain's event loop (worker.StepLoop): steps started from the drain's thread are
batched — one wake-up of the loop per batch, not one per step — and still each settles its
own future, a future cancelled before its task exists never runs, and cancelling a running
one cancels its task."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import CancelledError, Future

import pytest

from executions import worker


@pytest.fixture
def step_loop():
    loop = worker.StepLoop()
    yield loop
    loop.shutdown()


def block(step_loop: worker.StepLoop) -> threading.Event:
    """Keep the loop busy until the returned event is set (so starts pile up)."""
    release, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(5)

    step_loop.loop.call_soon_threadsafe(hold)
    assert busy.wait(5)
    return release


def test_starts_from_another_thread_wake_the_loop_once_per_batch_and_each_settles(step_loop, monkeypatch):
    wakes: list[object] = []
    real = step_loop.loop.call_soon_threadsafe

    def counting(callback, *args):
        wakes.append(callback)
        return real(callback, *args)

    release = block(step_loop)
    monkeypatch.setattr(step_loop.loop, "call_soon_threadsafe", counting)

    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    futures = [Future() for _ in range(10)]
    for n, future in enumerate(futures):
        step_loop.start(double(n), future)
    assert len(wakes) == 1, "one wake-up for the ten starts made while the loop was busy"
    release.set()
    assert [future.result(timeout=5) for future in futures] == [2 * n for n in range(10)]
    step_loop.start(double(21), after := Future())
    assert after.result(timeout=5) == 42
    assert len(wakes) == 2, "a start after the batch was taken wakes the loop again"


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
