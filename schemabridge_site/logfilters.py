"""Logging filters (imported while settings load, so no model imports here)."""

from __future__ import annotations

import logging


class NotDemoLedger(logging.Filter):
    """Keeps the demo ledger's deliberate 503 answers out of the error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return not (request is not None and str(getattr(request, "path", "")).startswith("/demo/ledger/"))
