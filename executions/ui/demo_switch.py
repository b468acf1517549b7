"""The demo ledger's health switch (``make run``'s outage): the one write here, for want of
a service in ``executions/demo.py``; the Rate Limits page flips it, audited."""

from __future__ import annotations

from executions import demo
from executions.models import DemoSwitch


def ledger_healthy() -> bool:
    return demo.ledger_healthy()


def set_ledger_healthy(on: bool) -> None:
    DemoSwitch.objects.update_or_create(name=demo.LEDGER_HEALTHY, defaults={"on": on})
