"""Array parameters: the set-based statements send each column as one list, which psycopg's
own binary dumper writes (registered by ``ExecutionsConfig.ready``) — the same values reach
PostgreSQL unchanged, whatever their kind."""

from __future__ import annotations

import datetime
import json
import uuid

import psycopg
import pytest
from django.db import DataError, connection
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.types.array import ListBinaryDumper

from executions.models import StepStatus

pytestmark = pytest.mark.django_db

AWKWARD = ['plain', '', 'NULL', 'null', 'with "quotes"', 'back\\slash', '\\"', 'a,b', '{braces}', ' padded ',
           "it's", 'tab\there', 'line\nbreak', 'ünïcødé ✓', '{"json": ["x", 1]}']


def roundtrip(sql: str, values: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, [values])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("sql, values", [
    ("SELECT %s::bigint[]", [1, -2, 3_000_000_000, 0]),
    ("SELECT %s::bigint[]", [1, None, 3]),
    ("SELECT %s::uuid[]", [uuid.UUID(int=1), None, uuid.uuid4()]),
    ("SELECT %s::text[]", AWKWARD),
    ("SELECT %s::text[]", [None, "x", None]),
    ("SELECT %s::varchar[]", AWKWARD),
    ("SELECT %s::jsonb[]", ['{"a": "b\\"c"}', '[1, "\\\\"]']),
    ("SELECT %s::int[]", []),
    ("SELECT %s::text[]", [None, None]),
    ("SELECT %s::bool[]", [True, False, None]),
    ("SELECT %s::float8[]", [0.5, 1e-9, None]),
    ("SELECT %s::int[][]", [[1, 2], [3, 4]]),
    ("SELECT %s::timestamptz[]", [datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)]),
    ("SELECT %s::text[]", [StepStatus.RUNNING, StepStatus.READY]),
], ids=["ints", "ints-with-null", "uuids", "awkward-text", "text-with-null", "varchar", "json-text", "empty",
        "only-nulls", "bools", "floats", "nested", "datetimes", "enums"])
def test_lists_arrive_unchanged(sql, values):
    got = roundtrip(sql, values)
    if sql.endswith("jsonb[]"):  # Django's connections load jsonb as text (JSONField decodes it)
        assert [json.loads(g) if isinstance(g, str) else g for g in got] == [json.loads(v) for v in values]
    else:
        assert got == values


def test_a_list_goes_as_a_binary_array_by_psycopgs_dumper_and_mixed_kinds_are_refused():
    with connection.cursor() as cursor:
        assert not isinstance(cursor.cursor, psycopg.ClientCursor), "Django's cursors bind on the server"
        transformer = Transformer.from_context(cursor.cursor)  # as psycopg picks a %s parameter's dumper
        for values in ([1, 2], [uuid.uuid4()], ["a"]):
            dumper = transformer.get_dumper(values, PyFormat.AUTO)
            assert dumper.format == pq.Format.BINARY and isinstance(dumper, ListBinaryDumper)
        with pytest.raises(DataError, match="mixed types"):
            cursor.execute("SELECT %s", [[1, "1"]])
