"""The MERGE rule (docs/dsl.md, "MERGE"; S10): when a fan-out is decided and whether it
failed. This module is its only definition.

The verdicts are SQL expressions over a fan-out row aliased ``f``, so the database is the
one place that evaluates them: the merge wake-up (state.py), the merge vertex (fanout.py)
and the read layer (selectors/fanouts.py) select them as columns. ``allowed_failures``
fixes the tolerance once, when the fan-out is planned; ``explain`` puts a row in words.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

# Failed/cancelled children in a status the merge tolerates.
FANOUT_TOLERATED = (
    "(CASE WHEN f.tolerates_failed THEN f.failed ELSE 0 END"
    " + CASE WHEN f.tolerates_cancelled THEN f.cancelled ELSE 0 END)"
)
# The merge fails: a child ended in a status it does not tolerate, or more than allowed did.
FANOUT_EXCEEDED = (
    f"((f.failed + f.cancelled - {FANOUT_TOLERATED}) > 0 OR {FANOUT_TOLERATED} > f.allowed_failures)"
)
# Every item was spawned and every child has ended.
FANOUT_FINISHED = "(f.spawn_complete AND f.succeeded + f.failed + f.cancelled >= f.total)"
# The merge may decide now: all children ended, or failFast and failure is certain.
FANOUT_DECIDED = f"({FANOUT_FINISHED} OR (f.fail_fast AND {FANOUT_EXCEEDED}))"


def allowed_failures(ratio: float, total: int) -> int:
    """floor(ratio × N), computed exactly (0.29 × 100 is 29, not 28)."""
    return math.floor(Decimal(str(ratio)) * total)


def explain(fan: dict[str, Any]) -> str:
    """The merge's state in words, e.g. "3 failed of 1,000; tolerance 5% allows 50; failFast on"."""
    total, done = fan["total"], fan["succeeded"] + fan["failed"] + fan["cancelled"]
    parts = [f"{fan['succeeded']:,} succeeded, {fan['failed']:,} failed, {fan['cancelled']:,} cancelled "
             f"of {total:,} ({total - done:,} not finished)"]
    tolerated = [s for s, on in (("FAILED", fan["tolerates_failed"]), ("CANCELLED", fan["tolerates_cancelled"])) if on]
    if tolerated:
        parts.append(f"tolerates {' and '.join(tolerated)} up to {fan['max_failure_ratio']:.4g} "
                     f"({fan['max_failure_ratio'] * 100:.4g}%) which allows {fan['allowed_failures']:,}")
    else:
        parts.append("no failure tolerated")
    parts.append(f"failFast {'on' if fan['fail_fast'] else 'off'}")
    return "; ".join(parts)
