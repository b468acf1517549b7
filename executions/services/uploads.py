"""Uploads: lists of items received as JSON Lines or CSV, for a start to name with
``{"$upload": "<id>"}`` instead of sending the list inline.

Receiving streams the body: it is read in chunks, parsed line by line and inserted in
batches, so memory is bounded by a batch (and one line), never the file. The whole upload
is one transaction: a bad line refuses it with its line number and nothing is stored.

Items are rows of ``executions_uploaditem``; the payload store's trigger counts their bytes
(an upload takes space like the input it becomes). A start copies the list into the
execution's input inside PostgreSQL (``payloads.fill_from_uploads``), never through Python.
Uploads are deleted ``SB_UPLOAD_RETENTION_SECONDS`` after their creation or last use.
"""

from __future__ import annotations

import codecs
import csv
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction

from executions.core import payloads, storable
from executions.models import UploadFormat
from workflows.errors import Conflict, Invalid, NotFound, ServiceError

MARKER = "$upload"
CHUNK = 64 * 1024
BATCH_ITEMS = 1000
BATCH_BYTES = 4 * 1024 * 1024
BOM = codecs.BOM_UTF8  # what a spreadsheet's "CSV UTF-8" starts with; not part of the first key
MEDIA_TYPES = {"application/x-ndjson": UploadFormat.JSONL, "text/csv": UploadFormat.CSV}

CREATE = """
    INSERT INTO executions_upload (id, workspace_id, format, items, bytes, created_by, created_at)
    VALUES (%(id)s, %(workspace)s, %(format)s, 0, 0, %(by)s, now())
"""

INSERT_ITEMS = """
    INSERT INTO executions_uploaditem (upload_id, index, data, size_bytes)
    SELECT %(upload)s, unnest(%(indexes)s::int[]), unnest(%(data)s::text[])::jsonb, unnest(%(sizes)s::int[])
"""

FINISH = "UPDATE executions_upload SET items = %(items)s, bytes = %(bytes)s WHERE id = %(id)s"

# The workspace's upload quota and what its other uploads take. With LOCK, the workspace row is
# locked FOR NO KEY UPDATE (foreign-key checks of its other writes take KEY SHARE and do not
# wait), so two uploads finishing at once are checked one after the other.
QUOTA = """
    SELECT p.upload_bytes,
           (SELECT coalesce(sum(u.bytes), 0) FROM executions_upload u
            WHERE u.workspace_id = w.id AND u.id <> %(upload)s),
           (SELECT count(*) FROM executions_upload u WHERE u.workspace_id = w.id AND u.id <> %(upload)s)
    FROM workflows_workspace w JOIN workflows_plan p ON p.id = w.plan_id
    WHERE w.id = %(workspace)s
"""
LOCK_WORKSPACE = "SELECT id FROM workflows_workspace WHERE id = %(workspace)s FOR NO KEY UPDATE"

# One upload, locked for deletion; NOWAIT: a start copying it right now holds its row.
LOCK_UPLOAD = "SELECT id FROM executions_upload WHERE id = %(id)s AND workspace_id = %(workspace)s FOR UPDATE NOWAIT"
DELETE_UPLOAD = """
    WITH items AS (DELETE FROM executions_uploaditem WHERE upload_id = %(id)s)
    DELETE FROM executions_upload WHERE id = %(id)s
"""

# Mark uploads as used by a start (and lock them: retention skips locked rows).
USE = """
    UPDATE executions_upload SET last_used_at = now()
    WHERE id = ANY(%(ids)s::uuid[]) AND workspace_id = %(workspace)s
    RETURNING id
"""

# Uploads unused for the retention period, with their items; locked ones are being used now.
RETENTION = """
    WITH old AS (
        SELECT id FROM executions_upload
        WHERE coalesce(last_used_at, created_at) < now() - make_interval(secs => %(age)s)
        ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
    ), items AS (
        DELETE FROM executions_uploaditem i USING old WHERE i.upload_id = old.id
    )
    DELETE FROM executions_upload u USING old WHERE u.id = old.id
"""


class UploadTooLarge(ServiceError):
    status, code = 413, "payload-too-large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"the upload is larger than {limit:,} bytes (SB_UPLOAD_MAX_BYTES)")


class UploadQuotaExceeded(ServiceError):
    status, code = 413, "upload-quota-exceeded"

    def __init__(self, *, size: int | None, allowed: int, used: int, count: int) -> None:
        needs = f"this upload ({size:,} bytes)" if size is not None else "this upload"
        super().__init__(f"the workspace's uploads would exceed its plan's upload quota: {needs} and the "
                         f"{count:,} stored uploads ({used:,} bytes) need more than {allowed:,} bytes; delete "
                         "unused uploads (DELETE /api/v1/uploads/{id}) or wait for them to expire")


class BadLine(Invalid):
    """A line of the file that is not an item; nothing of the upload is stored."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}", errors=[{"field": "body", "message": f"line {line}: {message}"}])
        self.line = line


@dataclass(frozen=True)
class Received:
    id: uuid.UUID
    items: int
    bytes: int
    format: str


def media_format(content_type: str) -> str | None:
    """The upload format of a Content-Type (parameters such as charset ignored), or None."""
    return MEDIA_TYPES.get(content_type.split(";", 1)[0].strip().lower())


def receive(workspace_id: int, read: Callable[[int], bytes], *, format: str, limit: int | None = None,
            created_by: str = "") -> Received:
    """Store the items of a body read with ``read(n)`` (at most ``limit`` bytes, by default
    ``SB_UPLOAD_MAX_BYTES``, else ``UploadTooLarge``) in one transaction (the caller's, if it
    has one). Raises ``BadLine`` for a line that is not an item; nothing is then stored."""
    limit = int(settings.SB["UPLOAD_MAX_BYTES"]) if limit is None else limit
    upload_id = uuid.uuid4()
    with transaction.atomic(), connection.cursor() as cursor:
        allowed, used, count = _quota(cursor, workspace_id, upload_id)
        counter = _Counter(read, limit, room=allowed - used,
                           over=lambda: UploadQuotaExceeded(size=None, allowed=allowed, used=used, count=count))
        cursor.execute(CREATE, {"id": upload_id, "workspace": workspace_id, "format": format,
                                "by": created_by[:200]})
        lines = _lines(counter.chunks())
        items = _jsonl(lines) if format == UploadFormat.JSONL else _csv(lines)
        total = _store(cursor, upload_id, items)
        cursor.execute(FINISH, {"items": total, "bytes": counter.size, "id": upload_id})
        # Checked again under the workspace's lock: uploads received at the same time each saw
        # room the other is now taking.
        allowed, used, count = _quota(cursor, workspace_id, upload_id, lock=True)
        if used + counter.size > allowed:
            raise UploadQuotaExceeded(size=counter.size, allowed=allowed, used=used, count=count)
    return Received(upload_id, total, counter.size, format)


def _quota(cursor: Any, workspace_id: int, upload_id: uuid.UUID, *, lock: bool = False) -> tuple[int, int, int]:
    """(the plan's upload bytes, the bytes and the number of the workspace's other uploads)."""
    if lock:
        cursor.execute(LOCK_WORKSPACE, {"workspace": workspace_id})
    cursor.execute(QUOTA, {"workspace": workspace_id, "upload": upload_id})
    allowed, used, count = cursor.fetchone()
    return int(allowed), int(used), int(count)


def delete(workspace_id: int, upload_id: uuid.UUID) -> None:
    """Delete an upload of the workspace with its items (their bytes leave the payload store
    and the quota). Executions started from it keep their input: a start copied the list.
    ``NotFound`` if the workspace has no such upload; ``Conflict`` while a start is copying it."""
    with transaction.atomic(), connection.cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute(LOCK_UPLOAD, {"id": upload_id, "workspace": workspace_id})
                found = cursor.fetchone()
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", "") != "55P03":  # lock_not_available
                raise
            raise Conflict(f"upload {upload_id} is being copied into an execution's input right now; "
                           "try again in a moment") from error
        if found is None:
            raise NotFound(f"no upload {upload_id} in this workspace")
        cursor.execute(DELETE_UPLOAD, {"id": upload_id})


class _Counter:
    """The body's chunks, refused once past ``limit`` (the upload's) or ``room`` (the quota's)."""

    def __init__(self, read: Callable[[int], bytes], limit: int, *, room: int,
                 over: Callable[[], ServiceError]) -> None:
        self.read, self.limit, self.room, self.over, self.size = read, limit, room, over, 0

    def chunks(self) -> Iterator[bytes]:
        while chunk := self.read(CHUNK):
            self.size += len(chunk)
            if self.size > self.limit:
                raise UploadTooLarge(self.limit)
            if self.size > self.room:
                raise self.over()
            yield chunk


def _lines(chunks: Iterator[bytes]) -> Iterator[tuple[int, str]]:
    """``(line number, text with its newline)``, decoded as UTF-8 (a leading byte-order mark
    dropped), each line at most ``SB_UPLOAD_MAX_LINE_BYTES``: one item's JSON is parsed whole,
    and a parsed line takes many times its bytes, so the cap bounds a request's memory."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    cap = int(settings.SB["UPLOAD_MAX_LINE_BYTES"])
    pending, number, first = b"", 0, True
    for chunk in chunks:
        pending += chunk
        if first and len(pending) >= len(BOM):
            pending, first = pending.removeprefix(BOM), False
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            number += 1
            if len(raw) > cap:
                raise BadLine(number, f"longer than {cap:,} bytes (SB_UPLOAD_MAX_LINE_BYTES)")
            yield number, _decode(decoder, raw + b"\n", number)
        if len(pending) > cap:
            raise BadLine(number + 1, f"longer than {cap:,} bytes (SB_UPLOAD_MAX_LINE_BYTES)")
    if pending:
        yield number + 1, _decode(decoder, pending.removeprefix(BOM) if first else pending, number + 1)


def _decode(decoder: Any, raw: bytes, number: int) -> str:
    try:
        return str(decoder.decode(raw, final=True))
    except UnicodeDecodeError as error:
        raise BadLine(number, f"not UTF-8 ({error.reason} at byte {error.start})") from error


def _jsonl(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """``(line number, stored JSON text)`` per non-blank line."""
    for number, text in lines:
        if not text.strip():
            continue
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError as error:
            raise BadLine(number, "nested too deeply") from error
        except ValueError as error:
            raise BadLine(number, f"not JSON: {error}") from error
        yield number, _stored(value, number)


def _csv(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """One object of strings per row, keyed by the header row; quoted fields may span lines
    (a record's number is that of its first line)."""
    cap = int(settings.SB["UPLOAD_MAX_LINE_BYTES"])
    record = {"bytes": 0, "first": 1}  # the record being read: its size so far, its first line

    def texts() -> Iterator[str]:
        # A quoted field may span lines: the cap holds for a whole record, as for a JSON line.
        for _, text in lines:
            record["bytes"] += len(text)
            if record["bytes"] > cap:
                raise BadLine(record["first"], f"a record longer than {cap:,} bytes (SB_UPLOAD_MAX_LINE_BYTES)")
            yield text

    reader = csv.reader(texts(), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise BadLine(1, "the CSV has no header row")
        names = _header(header)
        first = reader.line_num + 1
        record.update(bytes=0, first=first)
        for row in reader:
            if row and len(row) != len(names):
                raise BadLine(first, f"{len(row)} fields, but the header has {len(names)}")
            if row:
                yield first, _stored(dict(zip(names, row, strict=True)), first)
            first = reader.line_num + 1
            record.update(bytes=0, first=first)
    except csv.Error as error:  # named by the record's first line, where its reader began it
        raise BadLine(record["first"], f"not CSV: {error}") from error


def _header(row: list[str]) -> list[str]:
    columns = int(settings.SB["UPLOAD_MAX_COLUMNS"])
    if len(row) > columns:
        raise BadLine(1, f"the header has {len(row):,} columns; at most {columns:,} (SB_UPLOAD_MAX_COLUMNS)")
    names = [name.strip() for name in row]
    if any(not name for name in names):
        raise BadLine(1, "every header field needs a name")
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise BadLine(1, f"the header repeats {', '.join(repr(n) for n in duplicates[:10])}")
    return names


def _stored(value: Any, number: int) -> str:
    problem = next(storable.unstorable(value), None)
    if problem is not None:
        path, message = problem
        raise BadLine(number, f"the item at {path}: {message}")
    try:
        return payloads.encode(value)
    except payloads.PayloadError as error:
        raise BadLine(number, f"the item is {error}") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _store(cursor: Any, upload_id: uuid.UUID, items: Iterator[tuple[int, str]]) -> int:
    batch: list[str] = []
    size = total = 0
    for _, text in items:
        batch.append(text)
        size += len(text)
        if len(batch) >= BATCH_ITEMS or size >= BATCH_BYTES:
            _insert(cursor, upload_id, total, batch)
            total += len(batch)
            batch, size = [], 0
    _insert(cursor, upload_id, total, batch)
    return total + len(batch)


def _insert(cursor: Any, upload_id: uuid.UUID, first: int, batch: list[str]) -> None:
    if batch:
        cursor.execute(INSERT_ITEMS, {"upload": upload_id, "indexes": list(range(first, first + len(batch))),
                                      "data": batch, "sizes": [len(text.encode()) for text in batch]})


# --- naming an upload in a start ----------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """An upload named in an input: its list goes at ``path`` (keys and indexes)."""

    path: list[str]
    upload: uuid.UUID


def placements(data: Any) -> list[Placement]:
    """Where ``data`` names uploads (``{"$upload": "<id>"}``); ``Invalid`` for a malformed
    marker, with its JSON path."""
    found: list[Placement] = []
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict) and MARKER in value:
            found.append(_placement(value, path))
        elif isinstance(value, dict):
            stack.extend((member, [*path, key]) for key, member in value.items())
        elif isinstance(value, list):
            stack.extend((member, [*path, str(index)]) for index, member in enumerate(value))
    return found


def _placement(marker: dict[str, Any], path: list[str]) -> Placement:
    where = "$.input" + "".join(f"[{key}]" if key.isdigit() else f".{key}" for key in path)
    if not path:
        raise Invalid("an upload goes where a list is expected inside the input, e.g. "
                      '{"entries": {"$upload": "<id>"}}', errors=[{"path": where, "message": "not at the top"}])
    try:
        if len(marker) != 1:
            raise ValueError
        return Placement(path, uuid.UUID(str(marker[MARKER])))
    except (ValueError, TypeError) as error:
        message = 'an upload is named as {"$upload": "<upload id>"} and nothing else'
        raise Invalid(message, errors=[{"path": where, "message": message}]) from error


def use(cursor: Any, workspace_id: int, found: list[Placement]) -> None:
    """Mark the named uploads used (locking them against retention); ``NotFound`` if one is
    not in the workspace (never uploaded, or expired)."""
    wanted = sorted({p.upload for p in found})
    cursor.execute(USE, {"ids": wanted, "workspace": workspace_id})
    present = {row[0] for row in cursor.fetchall()}
    missing = [str(upload) for upload in wanted if upload not in present]
    if missing:
        hours = float(settings.SB["UPLOAD_RETENTION_SECONDS"]) / 3600
        raise NotFound(f"no upload {', '.join(missing)} in this workspace (unused uploads are deleted after "
                       f"{hours:g} hours, SB_UPLOAD_RETENTION_SECONDS)")


def apply_retention(cursor: Any, *, age_seconds: float | None = None, limit: int = 20) -> int:
    """Delete up to ``limit`` uploads unused for the retention age, with their items; returns
    how many uploads."""
    age = settings.SB["UPLOAD_RETENTION_SECONDS"] if age_seconds is None else age_seconds
    cursor.execute(RETENTION, {"age": float(age), "limit": limit})
    return int(cursor.rowcount)
