"""The grammar of a schedule's cron expression, as one regular expression: what
``schedules.validated`` accepts (before croniter computes fire times) and what the API's
schema states as the field's ``pattern``.

Five fields (minute hour day-of-month month day-of-week) separated by spaces or tabs, each a
comma-separated list of ``*``, a value, or a range ``low-high`` (``low`` strictly below
``high``), each optionally with ``/step``; months and days of the week also by name
(``jan``-``dec``, ``sun``-``sat``, any case; ``7`` is Sunday too). Or an alias such as
``@hourly``. A backwards range (``1-0``) and a range of one value (``5-5``, which croniter
7 reads as every value) are not in the grammar.
"""

from __future__ import annotations

import re

ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Each field's values, and its names with the value each stands for.
BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, dict(zip(MONTHS, range(1, 13), strict=True))),
    (0, 7, dict(zip(DAYS, range(7), strict=True))))
NAMES = BOUNDS[3][2] | BOUNDS[4][2]
_GAP = "[ \t]+"


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c}]" if c.isalpha() else re.escape(c) for c in word)


def _numbers(low: int, high: int) -> str:
    """Decimal numbers from ``low`` to ``high`` (< 100); a single digit may have a leading 0."""
    def decade(tens: int, first: int, last: int) -> str:
        digit = str(first) if first == last else f"[{first}-{last}]"
        return f"{tens}{digit}" if tens else f"0?{digit}"
    if low // 10 == high // 10:
        return decade(low // 10, low % 10, high % 10)
    parts = [decade(low // 10, low % 10, 9)] if low % 10 else []
    full_from, full_to = (low + 9) // 10, (high + 1) // 10 - 1
    if full_from == 0 and full_to >= 0:
        parts.append("0?[0-9]")
        full_from = 1
    if full_from <= full_to:
        parts.append(f"{full_from}[0-9]" if full_from == full_to else f"[{full_from}-{full_to}][0-9]")
    if high % 10 != 9:
        parts.append(decade(high // 10, 0, high % 10))
    return "|".join(parts)


def _values(low: int, high: int, names: dict[str, int]) -> str:
    """The values from ``low`` to ``high``, as numbers or names (empty if none)."""
    if low > high:
        return ""
    return "|".join([_numbers(low, high), *(_any_case(n) for n, v in names.items() if low <= v <= high)])


def _field(low: int, high: int, names: dict[str, int]) -> str:
    ranges = "|".join(f"(?:{_values(v, v, names)})-(?:{_values(v + 1, high, names)})" for v in range(low, high))
    item = rf"(?:\*|{ranges}|{_values(low, high, names)})(?:/[1-9][0-9]*)?"
    return f"(?:{item})(?:,(?:{item}))*"


FIELD_GRAMMARS = tuple(re.compile(_field(*bounds)) for bounds in BOUNDS)


def _grammar() -> str:
    fields = _GAP.join(f"(?:{field.pattern})" for field in FIELD_GRAMMARS)
    aliases = "|".join(_any_case(alias) for alias in ALIASES)
    return f"^[ \t]*(?:{aliases}|{fields})[ \t]*$"


PATTERN = _grammar()
GRAMMAR = re.compile(PATTERN)


def unreadable_field(fields: list[str]) -> str:
    """Why the first of five ``fields`` outside the grammar is (empty if none), for a message."""
    for name, (low, high, names), grammar, text in zip(FIELDS, BOUNDS, FIELD_GRAMMARS, fields, strict=True):
        if not grammar.fullmatch(text):
            spelled = f" (or {min(names, key=names.__getitem__)}-{max(names, key=names.__getitem__)})" if names else ""
            return (f"the {name} field {text!r} is not '*', a value {low}-{high}{spelled}, a range low-high or a "
                    "list of them, each with an optional /step")
    return ""
