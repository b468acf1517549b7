"""A worker process hands the interpreter lock between its threads every
``SB_GIL_SWITCH_SECONDS``: the drain's event loop waits for it on every call it starts or
ends (docs/performance.md, "Fourth pass")."""

from __future__ import annotations

import gc
import sys

import pytest

from executions import worker


@pytest.fixture
def switch_interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def gc_threshold():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


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


def test_the_first_drain_of_a_process_freezes_the_start_up_heap(monkeypatch, gc_threshold):
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


def test_the_first_drain_collects_the_young_generation_every_gc_young_threshold_allocations(
        monkeypatch, settings, gc_threshold):
    """A drain's in-flight steps are young objects that live for a call; at Python's 700 every
    young collection walked them again (docs/performance.md, "Seventh pass")."""
    settings.SB = {**settings.SB, "GC_YOUNG_THRESHOLD": 12_345}
    monkeypatch.setattr(worker, "_heap_frozen", False)
    monkeypatch.setattr(worker.gc, "freeze", lambda: None)
    gc.set_threshold(700, 10, 10)
    worker._freeze_the_start_up_heap()
    assert gc.get_threshold() == (12_345, 10, 10), "the older generations keep their thresholds"


def test_zero_keeps_pythons_young_threshold(monkeypatch, settings, gc_threshold):
    settings.SB = {**settings.SB, "GC_YOUNG_THRESHOLD": 0}
    monkeypatch.setattr(worker, "_heap_frozen", False)
    monkeypatch.setattr(worker.gc, "freeze", lambda: None)
    gc.set_threshold(700, 10, 10)
    worker._freeze_the_start_up_heap()
    assert gc.get_threshold() == (700, 10, 10)


def test_the_default_young_threshold_is_20000():
    from schemabridge_site.settings import SB

    assert SB["GC_YOUNG_THRESHOLD"] == 20_000
