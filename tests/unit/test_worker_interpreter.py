"""A worker process tunes its interpreter once, when it starts (interpreter.tune): it hands
the interpreter lock between its threads every ``SB_GIL_SWITCH_SECONDS`` — the drain's event
loop waits for it on every call it starts or ends (docs/performance-log.md, "Fourth pass") — and
keeps its start-up heap out of the collector's walks."""

from __future__ import annotations

import gc
import sys

import pytest

from executions.worker import interpreter


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


def test_the_switch_interval_comes_from_the_setting(settings, switch_interval):
    settings.SB = {**settings.SB, "GIL_SWITCH_SECONDS": 0.002}
    sys.setswitchinterval(0.005)
    interpreter.share_the_interpreter()
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_zero_keeps_the_interpreters_own_interval(settings, switch_interval):
    settings.SB = {**settings.SB, "GIL_SWITCH_SECONDS": 0}
    sys.setswitchinterval(0.005)
    interpreter.share_the_interpreter()
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_default_is_one_millisecond():
    from schemabridge_site.settings import SB

    assert SB["GIL_SWITCH_SECONDS"] == pytest.approx(0.001)


def test_a_worker_process_tunes_once_collecting_before_it_freezes_the_start_up_heap(
        monkeypatch, settings, switch_interval, gc_threshold):
    """gc.freeze once: the objects alive at worker start stay out of every later full
    collection, which otherwise stopped the whole process for ~170 ms at a time. (Counted by
    calls, not by gc.get_freeze_count(): a frozen object that is freed leaves that count.)"""
    calls: list[str] = []
    monkeypatch.setattr(interpreter, "_tuned", False)

    def collect(*args: object) -> int:
        calls.append("collect")
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    settings.SB = {**settings.SB, "GIL_SWITCH_SECONDS": 0.002}
    sys.setswitchinterval(0.005)
    interpreter.tune()
    assert calls == ["collect", "freeze"], "collected first, so no garbage is frozen"
    assert sys.getswitchinterval() == pytest.approx(0.002)
    sys.setswitchinterval(0.005)
    interpreter.tune()
    assert calls == ["collect", "freeze"], "a second call freezes nothing more"
    assert sys.getswitchinterval() == pytest.approx(0.005), "... and changes nothing"


def test_the_young_generation_is_collected_every_gc_young_threshold_allocations(
        monkeypatch, settings, gc_threshold):
    """A drain's in-flight steps are young objects that live for a call; at Python's 700 every
    young collection walked them again (docs/performance-log.md, "Seventh pass")."""
    settings.SB = {**settings.SB, "GC_YOUNG_THRESHOLD": 12_345}
    monkeypatch.setattr(gc, "freeze", lambda: None)
    gc.set_threshold(700, 10, 10)
    interpreter.freeze_the_start_up_heap()
    assert gc.get_threshold() == (12_345, 10, 10), "the older generations keep their thresholds"


def test_zero_keeps_pythons_young_threshold(monkeypatch, settings, gc_threshold):
    settings.SB = {**settings.SB, "GC_YOUNG_THRESHOLD": 0}
    monkeypatch.setattr(gc, "freeze", lambda: None)
    gc.set_threshold(700, 10, 10)
    interpreter.freeze_the_start_up_heap()
    assert gc.get_threshold() == (700, 10, 10)


def test_the_default_young_threshold_is_20000():
    from schemabridge_site.settings import SB

    assert SB["GC_YOUNG_THRESHOLD"] == 20_000


def test_a_worker_process_tunes_its_interpreter_when_it_starts(monkeypatch):
    """At django-q2's post_spawn, before its first drain (not at every drain task)."""
    from executions import kick, registry
    from executions.worker import tasks

    tuned: list[bool] = []
    monkeypatch.setattr(interpreter, "tune", lambda: tuned.append(True))
    monkeypatch.setattr(registry, "start_heartbeat", lambda cluster: None)
    monkeypatch.setattr(kick, "request_drain", lambda force=False: False)
    monkeypatch.setattr(tasks.schedules, "fire_due", lambda: 0)
    tasks.on_worker_spawn()
    assert tuned == [True]
