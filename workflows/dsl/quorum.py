"""The DSL rules of a quorum merge (S26, issue 31 §3): MERGE ``config.minSuccessful`` (an
integer ≥ 1) or ``config.minSuccessfulRatio`` (0 < r ≤ 1), one of the two. Each problem is
reported with its JSON path, like the rest of the parser (``parser._merge`` calls this).

A quorum decides the merge by itself (executions/core/merge_rule.py): it succeeds once that
many children succeeded and fails as soon as that has become impossible — so the tolerance
fields, which would say the same thing another way, cannot be combined with it, and
``failFast`` may only be ``true`` (what a quorum does anyway)."""

from __future__ import annotations

from typing import Any, Protocol

QUORUM_FIELDS = ("minSuccessful", "minSuccessfulRatio")
MAX_MIN_SUCCESSFUL = 2**31 - 1


class _Reader(Protocol):
    """What these rules use of the parser's reader (parser._Reader)."""

    def report(self, where: str, message: str) -> None: ...

    def integer(self, obj: dict[str, Any], key: str, where: str, default: int, *, low: int, high: int) -> int: ...

    def number(self, obj: dict[str, Any], key: str, where: str, default: float | None, *,
               low: float, high: float = ..., low_open: bool = False) -> float | None: ...


def quorum(reader: _Reader, config: dict[str, Any], where: str, *, tolerated: bool) -> tuple[int | None, float | None]:
    """``(minSuccessful, minSuccessfulRatio)`` of a MERGE's ``config`` (at ``where``), at most
    one of them set; (None, None) without a quorum. ``tolerated``: the config tolerates some
    failure statuses (without any, ``failureTolerance`` has no effect and is normalised away)."""
    given = [key for key in QUORUM_FIELDS if config.get(key) is not None]
    if not given:
        return None, None
    if len(given) > 1:
        reader.report(f"{where}.minSuccessfulRatio", "give minSuccessful or minSuccessfulRatio, not both")
        return None, None
    if tolerated:
        reader.report(f"{where}.tolerateChildFailures",
                      f"cannot be combined with {given[0]}: a quorum merge decides by its quorum (it fails once "
                      f"the quorum cannot be reached), not by a failure tolerance")
    if config.get("failFast") is False:
        reader.report(f"{where}.failFast", f"cannot be false with {given[0]}: a quorum merge fails as soon as its "
                                           f"quorum cannot be reached")
    if given[0] == "minSuccessful":
        return reader.integer(config, "minSuccessful", where, 0, low=1, high=MAX_MIN_SUCCESSFUL) or None, None
    ratio = reader.number(config, "minSuccessfulRatio", where, None, low=0, high=1, low_open=True)
    return None, ratio
