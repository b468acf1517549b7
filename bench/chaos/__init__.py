"""Fault-tolerance scenarios (``manage.py chaos``, ``tests/fault``): each runs a real qcluster,
injects one kind of fault during a fan-out, waits for the run to end and checks the
invariants in ``bench.chaos.invariants``. See docs/reliability.md."""

from __future__ import annotations

import importlib
from typing import Any

SCENARIOS = (
    "repeated_kills",
    "crash_mid_spawn",
    "postgres_restart",
    "backend_kill",
    "stale_lease",
    "destination_slot_crash",
    "poison_pill",
)


def run(name: str, lab: Any, items: int, **options: Any) -> dict[str, Any]:
    """Run scenario ``name`` with ``items`` items in ``lab``; options go to the scenario."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    module = importlib.import_module(f"bench.chaos.{name}")
    result: dict[str, Any] = module.run(lab, items, **{k: v for k, v in options.items() if v is not None})
    return result
