"""Array parameters as executions.pgarrays sends them: the same values reach PostgreSQL with
server-side binding (binary arrays, the default) and with client-side binding (literals written
by ``FlatListDumper``, or by psycopg's own dumper for the kinds it hands back)."""

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

from executions import pgarrays
from executions.models import StepStatus

pytestmark = pytest.mark.django_db

AWKWARD = ['plain', '', 'NULL', 'null', 'with "quotes"', 'back\\slash', '\\"', 'a,b', '{braces}', ' padded ',
           "it's", 'tab\there', 'line\nbreak', 'ünïcødé ✓', '{"json": ["x", 1]}']


@pytest.fixture(params=["server-side", "client-side"])
def roundtrip(request):
    """Send a list through a cursor of either binding on Django's connection (its adapters)."""
    def send(sql: str, values: list) -> list:
        connection.ensure_connection()
        cls = psycopg.Cursor if request.param == "server-side" else psycopg.ClientCursor
        with cls(connection.connection) as cursor:
            cursor.execute(sql, [values])
            return cursor.fetchone()[0]
    return send


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
], ids=["ints", "ints-with-null", "uuids", "awkward-text", "text-with-null", "varchar", "json-text", "empty",
        "only-nulls", "bools"])
def test_flat_lists_arrive_unchanged(roundtrip, sql, values):
    assert pgarrays.literal(values) is not None, "written by the fast path"
    got = roundtrip(sql, values)
    if sql.endswith("jsonb[]"):  # Django's connections load jsonb as text (JSONField decodes it)
        assert [json.loads(g) if isinstance(g, str) else g for g in got] == [json.loads(v) for v in values]
    else:
        assert got == values


@pytest.mark.parametrize("sql, values", [
    ("SELECT %s::float8[]", [0.5, 1e-9, None]),
    ("SELECT %s::int[][]", [[1, 2], [3, 4]]),
    ("SELECT %s::timestamptz[]", [datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)]),
    ("SELECT %s::text[]", [StepStatus.RUNNING, StepStatus.READY]),
], ids=["floats", "nested", "datetimes", "enums"])
def test_other_lists_go_to_psycopgs_own_dumper_and_arrive_unchanged(roundtrip, sql, values):
    assert pgarrays.literal(values) is None
    assert roundtrip(sql, values) == values


def test_mixed_kinds_are_not_written_by_the_fast_path():
    assert pgarrays.literal([1, "1"]) is None
    assert pgarrays.literal([1, True]) is None


def test_django_connections_use_it():
    with connection.cursor() as cursor:
        adapters = cursor.connection.adapters
        assert adapters.get_dumper(list, PyFormat.TEXT) is pgarrays.FlatListDumper
        assert adapters.get_dumper(list, PyFormat.AUTO) is pgarrays.FlatListBinaryDumper


def test_with_server_side_binding_a_list_goes_as_a_binary_array_and_mixed_kinds_are_refused():
    with connection.cursor() as cursor:
        assert not isinstance(cursor.cursor, psycopg.ClientCursor), "Django's cursors bind on the server"
        transformer = Transformer.from_context(cursor.cursor)  # as psycopg picks a %s parameter's dumper
        assert transformer.get_dumper([1, 2], PyFormat.AUTO).format == pq.Format.BINARY
        assert transformer.get_dumper([uuid.uuid4()], PyFormat.AUTO).format == pq.Format.BINARY
        with pytest.raises(DataError, match="mixed types"):
            cursor.execute("SELECT %s", [[1, "1"]])


class _UUIDSubclass(uuid.UUID):
    pass


@pytest.mark.parametrize("values", [
    [1, 2, 3], [-5, 40_000, 7], [2**40, -(2**40), 0], [32767, -32768], [2**31 - 1, -(2**31)],
    [2**63 - 1], [10**30], [1, None, 3], [True, False], [uuid.uuid4(), uuid.uuid4()],
    [uuid.UUID(int=0), None, uuid.UUID(int=2**128 - 1)], [None, uuid.uuid4()], [_UUIDSubclass(int=7)], ["a", "b"],
    [],
], ids=["int2", "int4", "int8", "int2-edges", "int4-edges", "int8-edge", "numeric", "with-null", "bools", "uuids",
        "uuids-with-null", "uuid-after-null", "uuid-subclass", "text", "empty"])
def test_the_binary_fast_paths_write_what_psycopg_writes(values):
    """Byte for byte, with the same element type, for every list (the fast paths take flat ints
    without NULLs and flat UUIDs; the rest goes to psycopg's own dump, or is refused as by it)."""
    connection.ensure_connection()
    transformer = Transformer(connection.connection)
    theirs = ListBinaryDumper(list, transformer).upgrade(values, PyFormat.BINARY)
    ours = pgarrays.FlatListBinaryDumper(list, transformer).upgrade(values, PyFormat.BINARY)
    assert ours.oid == theirs.oid
    assert bytes(ours.dump(values)) == bytes(theirs.dump(values))
