"""Logging filters of the demo (imported while settings load, so no model imports here)."""

from __future__ import annotations

import logging


class NotDemoLedger(logging.Filter):
    """Keeps the demo ledger's deliberate 503 answers (and, from the development server, its
    thousand request lines) out of the console."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if request is not None and str(getattr(request, "path", "")).startswith("/demo/ledger/"):
            return False
        return "/demo/ledger/" not in record.getMessage()
