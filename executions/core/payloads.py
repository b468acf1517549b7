"""The payload store (S7): execution inputs (name ``input``) and step outputs (name = the
vertex id), with live-byte accounting kept by database triggers (migration 0002) and a
capacity with a high-water mark that fan-outs respect."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

INPUT = "input"
# The input as it was before an operator's last edit (a retry with an edited input), kept so the
# UI can show what changed. A dot: no vertex id (a step output's name) can be this.
INPUT_BEFORE = "input.before"

# A payload copied under another name of the same execution (replacing an earlier copy).
COPY = """
    INSERT INTO executions_payload (execution_id, name, data, size_bytes, created_at)
    SELECT execution_id, %(target)s, data, size_bytes, now() FROM executions_payload
    WHERE execution_id = %(execution)s AND name = %(source)s
    ON CONFLICT (execution_id, name) DO UPDATE SET data = EXCLUDED.data, size_bytes = EXCLUDED.size_bytes
"""

INSERT = """
    INSERT INTO executions_payload (execution_id, name, data, size_bytes, created_at)
    SELECT unnest(%(executions)s::uuid[]), unnest(%(names)s::varchar[]), unnest(%(data)s::text[])::jsonb,
           unnest(%(sizes)s::int[]), now()
    ON CONFLICT (execution_id, name) DO UPDATE SET data = EXCLUDED.data, size_bytes = EXCLUDED.size_bytes
"""

# A MERGE's output: its children's outputs in item order, aggregated where they are stored.
MERGE_OUTPUT = """
    INSERT INTO executions_payload (execution_id, name, data, size_bytes, created_at)
    SELECT %(execution)s, %(name)s, agg.data, octet_length(agg.data::text), now()
    FROM (
        SELECT jsonb_build_object(
                   'items', coalesce(jsonb_agg(p.data ORDER BY c.item_index), '[]'::jsonb),
                   'counts', %(counts)s::jsonb) AS data
        FROM executions_execution c
        LEFT JOIN executions_payload p
               ON p.execution_id = c.id AND p.name = c.output_vertex AND c.status = 'SUCCEEDED'
        WHERE c.parent_id = %(execution)s AND c.spawn_vertex = %(spawner)s
          AND (NOT %(succeeded_only)s OR c.status = 'SUCCEEDED')
    ) agg
    ON CONFLICT (execution_id, name) DO UPDATE SET data = EXCLUDED.data, size_bytes = EXCLUDED.size_bytes
"""

# A MERGE over more children than MERGE_INLINE_ITEMS: the counts and the size only, never one
# value of every output (PostgreSQL caps a value at ~256 MB); readers page through the
# children's outputs (selectors.payloads.merge_page).
MERGE_SUMMARY = """
    INSERT INTO executions_payload (execution_id, name, data, size_bytes, created_at)
    SELECT %(execution)s, %(name)s, s.data, octet_length(s.data::text), now()
    FROM (SELECT jsonb_build_object('counts', %(counts)s::jsonb, 'total', %(total)s::int, 'itemsPaged', true,
                                    'spawner', %(spawner)s::text) AS data) s
    ON CONFLICT (execution_id, name) DO UPDATE SET data = EXCLUDED.data, size_bytes = EXCLUDED.size_bytes
"""

# Put an upload's items, as a list in file order, at a path inside a stored payload.
FILL_FROM_UPLOAD = """
    UPDATE executions_payload p SET data = filled.data, size_bytes = octet_length(filled.data::text)
    FROM (
        SELECT jsonb_set(p.data, %(path)s::text[], (
                   SELECT coalesce(jsonb_agg(i.data ORDER BY i.index), '[]'::jsonb)
                   FROM executions_uploaditem i WHERE i.upload_id = %(upload)s)) AS data
        FROM executions_payload p WHERE p.execution_id = %(execution)s AND p.name = %(name)s
    ) filled
    WHERE p.execution_id = %(execution)s AND p.name = %(name)s
"""

LOAD = """
    SELECT p.execution_id, p.name, p.data
    FROM executions_payload p
    JOIN unnest(%(executions)s::uuid[], %(names)s::varchar[]) AS w(execution_id, name)
      ON p.execution_id = w.execution_id AND p.name = w.name
"""

USAGE = "SELECT coalesce(sum(bytes), 0) FROM executions_payloadusage"

class PayloadError(ValueError):
    pass


# A JSON "\u0000" escape that is not itself an escaped backslash followed by "u0000".
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def encode(value: Any) -> str:
    """The stored JSON text of a value; raises PayloadError if it is not JSON that
    PostgreSQL's jsonb can store (no NaN/Infinity, no NUL character, no lone surrogate)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PayloadError(f"not JSON-serialisable: {error}") from error
    if _NUL_ESCAPE.search(text):
        raise PayloadError("not storable: it contains a NUL character (\\u0000), which jsonb cannot hold")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PayloadError("not storable: it contains an unpaired UTF-16 surrogate") from error
    return text


def put_merge_output(cursor: Any, execution_id: Any, name: str, *, spawner: str, counts: dict[str, int],
                     total: int, succeeded_only: bool = False) -> None:
    """Store a MERGE's output: ``{"items": [...children's outputs in item order], "counts": …}``
    up to ``MERGE_INLINE_ITEMS`` children (``succeeded_only``, a quorum merge's: the succeeded
    children's alone); beyond, ``{"counts", "total", "itemsPaged": true, "spawner"}`` (the
    items stay with the children, read in pages)."""
    params = {"execution": execution_id, "name": name, "counts": encode(counts), "spawner": spawner, "total": total,
              "succeeded_only": succeeded_only}
    inline = total <= int(settings.SB["MERGE_INLINE_ITEMS"])
    cursor.execute(MERGE_OUTPUT if inline else MERGE_SUMMARY, params)


def put_many(cursor: Any, entries: Sequence[tuple[Any, str, str]]) -> None:
    """Store ``(execution_id, name, json_text)`` entries in one statement."""
    if not entries:
        return
    cursor.execute(INSERT, {
        "executions": [entry[0] for entry in entries],
        "names": [entry[1] for entry in entries],
        "data": [entry[2] for entry in entries],
        "sizes": [len(entry[2].encode()) for entry in entries],
    })


def copy(cursor: Any, execution_id: Any, source: str, target: str) -> None:
    """Store a copy of payload ``source`` as ``target`` (nothing when ``source`` is not stored)."""
    cursor.execute(COPY, {"execution": execution_id, "source": source, "target": target})


def fill_from_upload(cursor: Any, execution_id: Any, name: str, *, path: list[str], upload: Any) -> None:
    """Replace the value at ``path`` in a stored payload with the items of ``upload``
    (executions/services/uploads.py), in file order; the list never leaves the database."""
    cursor.execute(FILL_FROM_UPLOAD, {"execution": execution_id, "name": name, "path": path, "upload": upload})


def decode(value: Any) -> Any:
    """A jsonb column read through Django's connection arrives as its JSON text."""
    return json.loads(value) if isinstance(value, str) else value


def load(cursor: Any, wanted: Iterable[tuple[Any, str]]) -> dict[tuple[Any, str], Any]:
    """Payload values for ``(execution_id, name)`` pairs; missing pairs are absent."""
    pairs = list(dict.fromkeys(wanted))
    if not pairs:
        return {}
    cursor.execute(LOAD, {"executions": [p[0] for p in pairs], "names": [p[1] for p in pairs]})
    return {(row[0], row[1]): decode(row[2]) for row in cursor.fetchall()}


@dataclass(frozen=True)
class Pressure:
    used_bytes: int
    capacity_bytes: int
    high_water: float

    @property
    def ratio(self) -> float:
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes else 1.0

    @property
    def above_high_water(self) -> bool:
        return self.ratio > self.high_water

    def describe(self) -> str:
        return (f"payload store at {self.ratio:.0%} of capacity "
                f"({self.used_bytes:,} of {self.capacity_bytes:,} bytes; high-water mark {self.high_water:.0%})")


def pressure(cursor: Any) -> Pressure:
    cursor.execute(USAGE)
    used = int(cursor.fetchone()[0])
    return Pressure(used, int(settings.SB["PAYLOAD_CAPACITY_BYTES"]), float(settings.SB["PAYLOAD_HIGH_WATER"]))

