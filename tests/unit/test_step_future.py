"""worker.StepFuture keeps ``concurrent.futures.Future``'s protocol — every test runs against
both, so the drain may hold either — without a condition variable per step."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError, Future, InvalidStateError

import pytest

from executions import worker


@pytest.fixture(params=[Future, worker.StepFuture], ids=["concurrent", "step"])
def make(request):
    return request.param


def test_a_result_settles_it_once(make):
    future = make()
    assert not future.done() and not future.cancelled()
    future.set_result(42)
    assert future.done() and future.result() == 42 and future.exception() is None
    with pytest.raises(InvalidStateError):
        future.set_result(43)
    with pytest.raises(InvalidStateError):
        future.set_exception(ValueError("late"))
    assert future.result() == 42
    assert not future.cancel(), "a settled future cannot be cancelled"


def test_an_exception_is_raised_by_result(make):
    future = make()
    future.set_exception(ValueError("boom"))
    assert isinstance(future.exception(), ValueError)
    with pytest.raises(ValueError, match="boom"):
        future.result()


def test_a_pending_future_cancels_and_refuses_a_late_result(make):
    future, seen = make(), []
    future.add_done_callback(seen.append)
    assert future.cancel() and future.cancel(), "cancelling twice still says cancelled"
    assert future.cancelled() and future.done()
    assert seen == [future], "callbacks run once, with the future"
    with pytest.raises(CancelledError):
        future.result()
    with pytest.raises(InvalidStateError):
        future.set_result(1)
    assert not future.set_running_or_notify_cancel(), "a pool thread skips a cancelled step"


def test_a_running_future_cannot_be_cancelled(make):
    future = make()
    assert future.set_running_or_notify_cancel()
    assert future.running() and not future.cancel()
    future.set_result("done")
    assert future.result() == "done"


def test_callbacks_run_in_order_and_at_once_when_added_late(make):
    future, seen = make(), []
    future.add_done_callback(lambda f: seen.append(("first", f.result())))
    future.add_done_callback(lambda f: seen.append(("second", f.result())))
    future.set_result(7)
    future.add_done_callback(lambda f: seen.append(("late", f.result())))
    assert seen == [("first", 7), ("second", 7), ("late", 7)]


def test_a_raising_callback_is_logged_and_the_others_still_run(make, caplog):
    future, seen = make(), []

    def bad(_: object) -> None:
        raise RuntimeError("callback broke")

    future.add_done_callback(bad)
    future.add_done_callback(seen.append)
    with caplog.at_level(logging.ERROR):
        future.set_result(1)
    assert seen == [future]
    assert "callback broke" in caplog.text


def test_result_waits_for_another_thread_and_times_out(make):
    future = make()
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    threading.Timer(0.05, future.set_result, ["later"]).start()
    assert future.result(timeout=5) == "later", "woken by the other thread's result, within the deadline"


def test_settling_from_many_threads_settles_once_and_calls_back_once(make):
    for _ in range(50):
        future, seen, won = make(), [], []
        future.add_done_callback(seen.append)

        def settle(value: int, future=future, won=won) -> None:
            try:
                future.set_result(value)
                won.append(value)
            except InvalidStateError:
                pass

        threads = [threading.Thread(target=settle, args=(n,)) for n in range(4)]
        threads.append(threading.Thread(target=future.cancel))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [future]
        assert len(won) == (0 if future.cancelled() else 1)
        if won:
            assert future.result() == won[0]
