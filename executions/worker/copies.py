"""A drain's copies of its destinations' call settings — base URL, credentials, timeout,
response cap — and how long each may start calls (executions/core/calls.py, "Copies").

A copy is what FOR_CALLS read, in a claim or on its own (``read``). It may start calls until
``COPY_SECONDS`` after the statement that read it was sent, or that confirmed it (a commit's
slot take-over returns the destination's ``config_version``); then it is read again before it
starts anything. A change of the settings returns only after that long, so a call that starts
after the change has returned always carries the new values. A copy also carries the
destination's flow state (a cooldown, an open breaker: ``blocked_for``), which changes without
warning; it starts calls only ``FLOW_SECONDS`` after a statement last told it that state."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from django.db import connection

from executions.core import calls


@dataclass(frozen=True)
class Copy:
    values: dict[str, Any]  # a FOR_CALLS row: what a step's vertex reads as ``step.destination``
    until: float  # monotonic time from which it starts no call
    # ... nor from this one, until a statement has told it the destination's flow state again
    # (calls.FLOW_SECONDS: a cooldown another drain's answer started reaches it that soon).
    flow_until: float = math.inf
    read_at: float = 0.0  # monotonic time the statement that read it was sent

    @property
    def version(self) -> int:
        return int(self.values["config_version"])

    @property
    def blocked_for(self) -> float:
        """Seconds from ``read_at`` until calls may start (a cooldown, an open breaker)."""
        return float(self.values.get("blocked_for") or 0.0)

    def fresh(self, now: float) -> bool:
        return now < self.until and now < self.flow_until

    def told(self, asked_at: float) -> Copy:
        """This copy after a statement sent at ``asked_at`` read the destination's flow state."""
        return Copy(self.values, self.until, max(self.flow_until, asked_at + calls.FLOW_SECONDS), self.read_at)

    def confirmed(self, version: int, asked_at: float) -> Copy:
        """This copy after a statement sent at ``asked_at`` found the destination at ``version``:
        good for longer if that is its own version, else lapsed at once (it must be read again)."""
        if version == self.version:
            return Copy(self.values, max(self.until, lasting_from(asked_at)),
                        max(self.flow_until, asked_at + calls.FLOW_SECONDS), self.read_at)
        return Copy(self.values, 0.0, 0.0, self.read_at)


def lasting_from(asked_at: float) -> float:
    return asked_at + calls.COPY_SECONDS


def of_claim(values: dict[str, Any], asked_at: float) -> Copy:
    """The copy a claim read (its transaction began at monotonic time ``asked_at``)."""
    return Copy(values, lasting_from(asked_at), asked_at + calls.FLOW_SECONDS, asked_at)


def read(destination_ids: list[int]) -> dict[int, Copy]:
    """Fresh copies of these destinations' settings (one statement of its own)."""
    asked_at = time.monotonic()
    with connection.cursor() as cursor:
        rows = calls.for_calls(cursor, destination_ids)
    return {destination: of_claim(values, asked_at) for destination, values in rows.items()}
