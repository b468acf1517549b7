"""Interpreter tuning for a worker process, applied once when it starts (``tune``): the
switch interval and the garbage collector. Process-wide: worker processes run nothing but
drains."""

from __future__ import annotations

import gc
import sys

from django.conf import settings

_tuned = False


def tune() -> None:
    """Apply both settings below, once per process (later calls do nothing)."""
    global _tuned
    if not _tuned:
        _tuned = True
        share_the_interpreter()
        freeze_the_start_up_heap()


def share_the_interpreter() -> None:
    """Hand the interpreter lock between threads every ``SB_GIL_SWITCH_SECONDS`` (1 ms; Python's
    default is 5 ms). The event loop's thread wakes for each answer and each call it starts;
    while the drain's thread or a step thread runs Python, it waits up to this long for the
    lock, and at a 50 ms call that wait is idle slot time (docs/performance-log.md). 0 keeps
    Python's default."""
    seconds = float(settings.SB["GIL_SWITCH_SECONDS"])
    if seconds > 0 and sys.getswitchinterval() != seconds:
        sys.setswitchinterval(seconds)


def freeze_the_start_up_heap() -> None:
    """Collect, then move every object alive now (modules, Django, the app registry: they live
    as long as the process) out of the collector's reach (``gc.freeze``). A full collection
    then walks only what drains made since: 3-12 ms instead of 165-180 ms, during which every
    thread of the process — the event loop's calls included — stood still (measured on a slow
    two-core machine).

    And collect the young generation every ``SB_GC_YOUNG_THRESHOLD`` allocations (20,000;
    Python's 700): a drain keeps a thousand steps in flight, each a few dozen objects that
    live for a call, and every young collection walked the ones not yet promoted — a tenth of
    a worker's CPU at a limit of 256 (docs/performance-log.md, "Seventh pass"). What a drain
    makes is freed by reference counting; the collector is only for cycles. 0 keeps Python's."""
    gc.collect()
    gc.freeze()
    young = int(settings.SB["GC_YOUNG_THRESHOLD"])
    if young > 0:
        gc.set_threshold(young, *gc.get_threshold()[1:])
