"""The demo ledger's tables. They were created by the ``executions`` app's first migration
and keep their names (``executions_demo*``): the ``demo`` app took them over without a data
migration. Without ``SB_DEMO=1`` the tables may exist, but nothing reads or writes them."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class DemoLedgerEntry(models.Model):
    """An entry written to the demo ledger destination; the Idempotency-Key makes a
    re-delivered write a no-op, as a real destination should."""

    idempotency_key = models.CharField(max_length=255, unique=True)
    entry = models.JSONField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "executions_demoledgerentry"

    def __str__(self) -> str:
        return self.idempotency_key


class DemoSwitch(models.Model):
    """Operator switches of the demo (e.g. whether the demo ledger is healthy)."""

    name = models.CharField(max_length=64, primary_key=True)
    on = models.BooleanField(default=False)

    class Meta:
        db_table = "executions_demoswitch"

    def __str__(self) -> str:
        return f"{self.name}={'on' if self.on else 'off'}"
