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
               terminal children never go down except by an operator retry, which re-opens),
               or the quorum reached;
* stops      = the verdict is certain before every child finished (failFast and exceeded, or
               the quorum reached): the spawner stops and the unfinished children are
               cancelled (fanout/merge.py ``sweep_of``).

**Quorum merges** (S26: ``minSuccessful``, or ``minSuccessfulRatio`` → ceil(r × N),
``quorum_of``) are the same rule with the quorum as the tolerance, fixed at plan time: both
failure statuses tolerated, ``allowed_failures`` = N − minSuccessful, failFast — so
``exceeded`` is "the quorum can no longer be reached" (more failed or cancelled children
than N − minSuccessful: the pending ones, spawned or not, counted as possible successes),
and fails the merge at once with failFast's sweep; ``reached`` (``f.min_successful`` set and
that many succeeded) decides it as a success. The two exclude each other (reached means at
most N − minSuccessful children can fail), and each is monotonic until an operator's retry.
A quorum larger than N can never be reached: exceeded from the start.

The rule is evaluated by PostgreSQL (the expressions below), where the counts live: the
wake-up of a WAITING merge (state.py), the MERGE vertex (fanout.py) and the readers
(selectors) select ``VERDICTS`` with the row, so nothing recomputes it in Python.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from executions.models import CancelCause

FANOUT_TOLERATED = (
    "(CASE WHEN f.tolerates_failed THEN f.failed ELSE 0 END"
    " + CASE WHEN f.tolerates_cancelled THEN f.cancelled ELSE 0 END)"
)
FANOUT_EXCEEDED = (
    f"((f.failed + f.cancelled - {FANOUT_TOLERATED}) > 0 OR {FANOUT_TOLERATED} > f.allowed_failures"
    " OR coalesce(f.min_successful > f.total, false))"
)
FANOUT_REACHED = "coalesce(f.succeeded >= f.min_successful, false)"
FANOUT_FINISHED = "(f.spawn_complete AND f.succeeded + f.failed + f.cancelled >= f.total)"
FANOUT_DECIDED = f"({FANOUT_FINISHED} OR (f.fail_fast AND {FANOUT_EXCEEDED}) OR {FANOUT_REACHED})"
FANOUT_STOPS = f"((f.fail_fast AND {FANOUT_EXCEEDED}) OR {FANOUT_REACHED})"

# The verdict columns, for a SELECT over ``executions_fanout f``.
VERDICTS = (
    f"{FANOUT_DECIDED} AS decided, {FANOUT_EXCEEDED} AS exceeded, {FANOUT_FINISHED} AS finished, "
    f"{FANOUT_TOLERATED} AS tolerated, {FANOUT_REACHED} AS reached, {FANOUT_STOPS} AS stops"
)

REACHED_MESSAGE = "the merge reached minSuccessful"  # the reason of the children a quorum cancels


def sweep_of(fan: dict[str, Any], failed_message: str) -> tuple[str, str]:
    """How the unfinished children of a fan-out that ``stops`` are cancelled: ``(cause,
    message)`` — a quorum reached cancels them as such (they are not re-run by a retry of the
    failed children), a merge that failed (failFast, or a quorum out of reach) as failFast
    does (S28: they are)."""
    if fan.get("reached"):
        return CancelCause.QUORUM, REACHED_MESSAGE
    return CancelCause.FAIL_FAST, failed_message


def allowed_failures(ratio: float, total: int, max_failures: int | None = None) -> int:
    """floor(ratio × N), computed exactly (0.29 × 100 is 29, not 28); at most ``max_failures``
    (failureTolerance.maxFailures, issue 31) when it is given."""
    allowed = math.floor(Decimal(str(ratio)) * total)
    return allowed if max_failures is None else min(allowed, max_failures)


def quorum_of(min_successful: int | None, ratio: float | None, total: int) -> int | None:
    """A quorum merge's minSuccessful over ``total`` children: as given, or ceil(ratio × N)
    computed exactly (0.3 × 10 is 3); None without a quorum."""
    if min_successful is not None:
        return min_successful
    if ratio is not None:
        return math.ceil(Decimal(str(ratio)) * total)
    return None


def merge_counts(fan: dict[str, Any]) -> dict[str, int]:
    """The counts a MERGE's output states: by terminal status, and for a quorum merge also
    the children never started (the spawner stopped at the quorum)."""
    counts = {"SUCCEEDED": fan["succeeded"], "FAILED": fan["failed"], "CANCELLED": fan["cancelled"]}
    if fan.get("min_successful") is not None:
        counts["NOT_STARTED"] = max(fan["total"] - fan["succeeded"] - fan["failed"] - fan["cancelled"], 0)
    return counts


def tolerated_statuses(fan: dict[str, Any]) -> list[str]:
    return [s for s, on in (("FAILED", fan["tolerates_failed"]), ("CANCELLED", fan["tolerates_cancelled"])) if on]


def explain(fan: dict[str, Any]) -> str:
    """The merge's state in words, e.g. "3 failed of 1,000; tolerance 5% allows 50; failFast on"."""
    total, done = fan["total"], fan["succeeded"] + fan["failed"] + fan["cancelled"]
    parts = [f"{fan['succeeded']:,} succeeded, {fan['failed']:,} failed, {fan['cancelled']:,} cancelled "
             f"of {total:,} ({total - done:,} not finished)"]
    tolerated = tolerated_statuses(fan)
    if fan.get("min_successful") is not None:
        parts.append(f"quorum: {fan['min_successful']:,} must succeed"
                     + (" (reached)" if fan.get("reached") else ""))
        return "; ".join(parts)
    if tolerated:
        count = "" if fan.get("max_failures") is None else f" and at most {fan['max_failures']:,}"
        parts.append(f"tolerates {' and '.join(tolerated)} up to {fan['max_failure_ratio']:.4g} "
                     f"({fan['max_failure_ratio'] * 100:.4g}%){count} which allows {fan['allowed_failures']:,}")
    else:
        parts.append("no failure tolerated")
    parts.append(f"failFast {'on' if fan['fail_fast'] else 'off'}")
    return "; ".join(parts)
