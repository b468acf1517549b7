"""Fixed-window counters in PostgreSQL, shared by every web process: failed logins, failed
token authentications and refused system-actor claims are counted per key, and a key over
its limit is refused (429, or a form error) until its window ends.

Each hit is one upsert on the database clock (``ON CONFLICT … DO UPDATE``), so concurrent
hits never lose a count and a flood adds no rows, only a higher count; rows of windows long
gone are deleted on the way.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

# The current window starts at a whole multiple of the window length since the epoch.
HIT = """
    INSERT INTO workflows_throttlecounter (key, window_start, hits)
    VALUES (%(key)s, to_timestamp(floor(extract(epoch FROM now()) / %(window)s) * %(window)s), 1)
    ON CONFLICT (key, window_start) DO UPDATE SET hits = workflows_throttlecounter.hits + 1
    RETURNING hits, extract(epoch FROM window_start + make_interval(secs => %(window)s) - now())::float8
"""

COUNT = """
    SELECT hits, extract(epoch FROM window_start + make_interval(secs => %(window)s) - now())::float8
    FROM workflows_throttlecounter
    WHERE key = %(key)s AND window_start = to_timestamp(floor(extract(epoch FROM now()) / %(window)s) * %(window)s)
"""

# Counters of windows that ended an hour or more ago can no longer refuse anything.
PRUNE = """
    DELETE FROM workflows_throttlecounter WHERE window_start < now() - make_interval(secs => %(window)s + 3600)
"""


@dataclass(frozen=True)
class Tally:
    hits: int
    seconds_left: float  # until the window ends and the count starts again


def hit(key: str, window: int) -> Tally:
    """Count one hit on ``key`` in the current ``window``-second window."""
    with connection.cursor() as cursor:
        cursor.execute(HIT, {"key": key[:200], "window": window})
        hits, left = cursor.fetchone()
        cursor.execute(PRUNE, {"window": window})
    return Tally(hits, max(left, 0.0))


def tally(key: str, window: int) -> Tally:
    """The hits on ``key`` in the current window, without counting one."""
    with connection.cursor() as cursor:
        cursor.execute(COUNT, {"key": key[:200], "window": window})
        row = cursor.fetchone()
    return Tally(row[0], max(row[1], 0.0)) if row else Tally(0, float(window))


def over(key: str, limit: int, window: int) -> Tally | None:
    """The tally of ``key`` if it has reached ``limit`` hits in this window, else ``None``."""
    current = tally(key, window)
    return current if current.hits >= limit else None
