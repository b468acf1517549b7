"""A worker process hands the interpreter lock between its threads every
``SB_GIL_SWITCH_SECONDS``: the drain's event loop waits for it on every call it starts or
ends (docs/performance.md, "Fourth pass")."""

from __future__ import annotations

import sys

import pytest

from executions import worker


@pytest.fixture
def switch_interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_a_drain_task_sets_the_switch_interval_from_the_setting(settings, switch_interval):
    settings.SB = {**settings.SB, "GIL_SWITCH_SECONDS": 0.002}
    sys.setswitchinterval(0.005)
    worker._share_the_interpreter()
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_zero_keeps_the_interpreters_own_interval(settings, switch_interval):
    settings.SB = {**settings.SB, "GIL_SWITCH_SECONDS": 0}
    sys.setswitchinterval(0.005)
    worker._share_the_interpreter()
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_default_is_one_millisecond():
    from schemabridge_site.settings import SB

    assert SB["GIL_SWITCH_SECONDS"] == pytest.approx(0.001)


def test_the_first_drain_of_a_process_freezes_the_start_up_heap(monkeypatch):
    """gc.freeze once: the objects alive at the first drain stay out of every later full
    collection, which otherwise stopped the whole process for ~170 ms at a time. (Counted by
    calls, not by gc.get_freeze_count(): a frozen object that is freed leaves that count.)"""
    calls: list[str] = []
    monkeypatch.setattr(worker, "_heap_frozen", False)
    def collect(*args: object) -> int:
        calls.append("collect")
        return 0

    monkeypatch.setattr(worker.gc, "collect", collect)
    monkeypatch.setattr(worker.gc, "freeze", lambda: calls.append("freeze"))
    worker._freeze_the_start_up_heap()
    assert calls == ["collect", "freeze"], "collected first, so no garbage is frozen"
    worker._freeze_the_start_up_heap()
    assert calls == ["collect", "freeze"], "a later drain freezes nothing more"
