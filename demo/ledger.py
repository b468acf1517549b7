"""The demo ledger's rules: which entries its outage refuses, and its health switch."""

from __future__ import annotations

import hashlib

from demo.models import DemoSwitch

LEDGER_HEALTHY = "ledger-healthy"
FAILING_PERCENT = 3


def refuses(entry_id: str) -> bool:
    """The deterministic ~3% of entries the unhealthy ledger refuses."""
    return int(hashlib.sha256(entry_id.encode()).hexdigest(), 16) % 100 < FAILING_PERCENT


def healthy() -> bool:
    return DemoSwitch.objects.filter(name=LEDGER_HEALTHY, on=True).exists()


def set_healthy(on: bool) -> None:
    """Flip the demo ledger's outage: healthy, it accepts every entry."""
    DemoSwitch.objects.update_or_create(name=LEDGER_HEALTHY, defaults={"on": on})
