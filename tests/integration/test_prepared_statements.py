"""Django's connections bind on the server and prepare a statement at its third run (after
two: ``SB_DB_PREPARE_THRESHOLD``, settings.database_binding), so the engine's claims and
commits are parsed and planned once per connection, not on every turn."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def prepared(cursor, text: str) -> int:
    cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{text}%"])
    return cursor.fetchone()[0]


def test_a_statement_run_twice_is_prepared_for_its_next_runs():
    marker = "sb_prepare_probe_7d1e"
    with connection.cursor() as cursor:
        assert not isinstance(cursor.cursor, psycopg.ClientCursor)
        statement = f"SELECT count(*) AS {marker} FROM unnest(%s::bigint[])"
        cursor.execute(statement, [[1, 2, 3]])
        assert prepared(cursor, marker) == 0, "not at its first run"
        cursor.execute(statement, [[4, 5]])
        assert cursor.fetchone()[0] == 2
        assert prepared(cursor, marker) == 0, "nor at its second"
        cursor.execute(statement, [[6]])
        assert cursor.fetchone()[0] == 1
        assert prepared(cursor, marker) == 1, "prepared at its third run"
        cursor.execute(statement, [[7, 8, 9, 10]])
        assert cursor.fetchone()[0] == 4, "and run prepared with new parameters"
