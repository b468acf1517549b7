"""The flow history of the Rate Limits page's charts (executions/flow_models.py): the owner of
``executions_destinationlimit`` (rows written by the trigger of migration 0025 when a
destination's limit in force changes; purged here) and ``executions_destinationsample``.

**Samples.** A live drain counts, every ``SAMPLE_SECONDS``, each destination's slots in use and
steps waiting for one (READY and due, or queued in a drain without a slot: the Rate Limits
page's counts) in one statement over the partial indexes of RUNNING and READY
destination-bound steps — only the steps that are running or waiting, never the finished
ones — and stores them for the period (``date_bin``) unless a drain already did: with several
drains, the first one per period writes, the others' statement finds the period taken and
counts nothing. A destination with nothing running or waiting gets no row (the charts read
a missing period as zero). Samples are taken only while drains live, that is while there
is work: when none is due, nothing waits either."""

from __future__ import annotations

from typing import Any

SAMPLE_SECONDS = 10

# The period's samples, unless a drain has written them already (the unique (at, destination)
# index answers the NOT EXISTS; then the counts are not computed at all).
SAMPLE = """
    WITH period AS (SELECT date_bin(make_interval(secs => %(seconds)s), now(), timestamptz '2000-01-01') AS at),
    counted AS (
        SELECT destination_id, count(*) FILTER (WHERE holds_slot) AS in_flight,
               count(*) FILTER (WHERE NOT holds_slot) AS waiting
        FROM executions_step WHERE status = 'RUNNING' AND destination_id IS NOT NULL
        GROUP BY destination_id
        UNION ALL
        SELECT destination_id, 0, count(*) FROM executions_step
        WHERE status = 'READY' AND destination_id IS NOT NULL AND due_at <= now()
        GROUP BY destination_id)
    INSERT INTO executions_destinationsample (destination_id, at, in_flight, waiting)
    SELECT c.destination_id, p.at, sum(c.in_flight), sum(c.waiting)
    FROM counted c CROSS JOIN period p
    WHERE NOT EXISTS (SELECT 1 FROM executions_destinationsample s WHERE s.at = p.at)
    GROUP BY c.destination_id, p.at
    ON CONFLICT (at, destination_id) DO NOTHING
"""

# Old history, keeping each destination's newest limit row before the cutoff: the limit in
# force when the kept history begins.
PURGE = """
    WITH old_samples AS (
        DELETE FROM executions_destinationsample WHERE at < now() - make_interval(secs => %(age)s)),
    kept AS (
        SELECT DISTINCT ON (destination_id) id FROM executions_destinationlimit
        WHERE created_at < now() - make_interval(secs => %(age)s)
        ORDER BY destination_id, created_at DESC, id DESC)
    DELETE FROM executions_destinationlimit
    WHERE created_at < now() - make_interval(secs => %(age)s) AND id NOT IN (SELECT id FROM kept)
"""


def sample(cursor: Any) -> int:
    """Store this period's in-flight and waiting counts (SAMPLE); how many rows it wrote."""
    cursor.execute(SAMPLE, {"seconds": SAMPLE_SECONDS})
    return int(cursor.rowcount)


def purge(cursor: Any, *, age_seconds: float) -> int:
    """Delete history older than ``age_seconds`` (the call log's retention); limit rows deleted."""
    cursor.execute(PURGE, {"age": age_seconds})
    return int(cursor.rowcount)
