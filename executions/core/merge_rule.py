"""The MERGE decision (S10): the one definition of the rule, used by everything that decides
or shows it.

A fan-out row ``f`` (executions_fanout) carries the counts of its children by terminal
status — moved in the same transaction as each child's transition (state.py) — and the
rule's inputs, fixed when the fan-out was planned: which failure statuses are tolerated,
``allowed_failures`` = floor(maxFailureRatio × N) (``allowed_failures()`` below, exact
decimal arithmetic), and ``failFast``. From them, in O(1):

* tolerated  = failed children whose status is tolerated;
* exceeded   = a child failed in a way not tolerated, or more tolerated failures than allowed;
* finished   = the spawner created every child and every child is terminal;
* decided    = finished, or failFast and exceeded (exceeding is then certain: counts of
               terminal children never go down except by an operator retry, which re-opens).

The rule is evaluated by PostgreSQL (the expressions below), where the counts live: the
wake-up of a WAITING merge (state.py), the MERGE vertex (fanout.py) and the readers
(selectors) select ``VERDICTS`` with the row, so nothing recomputes it in Python.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

FANOUT_TOLERATED = (
    "(CASE WHEN f.tolerates_failed THEN f.failed ELSE 0 END"
    " + CASE WHEN f.tolerates_cancelled THEN f.cancelled ELSE 0 END)"
)
FANOUT_EXCEEDED = (
    f"((f.failed + f.cancelled - {FANOUT_TOLERATED}) > 0 OR {FANOUT_TOLERATED} > f.allowed_failures)"
)
FANOUT_FINISHED = "(f.spawn_complete AND f.succeeded + f.failed + f.cancelled >= f.total)"
FANOUT_DECIDED = f"({FANOUT_FINISHED} OR (f.fail_fast AND {FANOUT_EXCEEDED}))"

# The verdict columns, for a SELECT over ``executions_fanout f``.
VERDICTS = (
    f"{FANOUT_DECIDED} AS decided, {FANOUT_EXCEEDED} AS exceeded, {FANOUT_FINISHED} AS finished, "
    f"{FANOUT_TOLERATED} AS tolerated"
)


def allowed_failures(ratio: float, total: int, max_failures: int | None = None) -> int:
    """floor(ratio × N), computed exactly (0.29 × 100 is 29, not 28); at most ``max_failures``
    (failureTolerance.maxFailures, issue 31) when it is given."""
    allowed = math.floor(Decimal(str(ratio)) * total)
    return allowed if max_failures is None else min(allowed, max_failures)


def tolerated_statuses(fan: dict[str, Any]) -> list[str]:
    return [s for s, on in (("FAILED", fan["tolerates_failed"]), ("CANCELLED", fan["tolerates_cancelled"])) if on]


def explain(fan: dict[str, Any]) -> str:
    """The merge's state in words, e.g. "3 failed of 1,000; tolerance 5% allows 50; failFast on"."""
    total, done = fan["total"], fan["succeeded"] + fan["failed"] + fan["cancelled"]
    parts = [f"{fan['succeeded']:,} succeeded, {fan['failed']:,} failed, {fan['cancelled']:,} cancelled "
             f"of {total:,} ({total - done:,} not finished)"]
    tolerated = tolerated_statuses(fan)
    if tolerated:
        count = "" if fan.get("max_failures") is None else f" and at most {fan['max_failures']:,}"
        parts.append(f"tolerates {' and '.join(tolerated)} up to {fan['max_failure_ratio']:.4g} "
                     f"({fan['max_failure_ratio'] * 100:.4g}%){count} which allows {fan['allowed_failures']:,}")
    else:
        parts.append("no failure tolerated")
    parts.append(f"failFast {'on' if fan['fail_fast'] else 'off'}")
    return "; ".join(parts)
