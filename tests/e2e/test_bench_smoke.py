"""``manage.py bench fanout`` runs end to end and verifies its own result (not its timing)."""

from __future__ import annotations

import json
import os

import psycopg
import pytest
from django.db import connection

from tests.support.cluster import TEST_SETTINGS, manage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_bench_fanout_200_is_ok(db):
    bench_db = f"{connection.settings_dict['NAME']}_bench_smoke"
    env = {**os.environ, **TEST_SETTINGS, "SB_BENCH_DB": bench_db}
    env.pop("SB_DB_NAME", None)
    try:
        done = manage("bench", "fanout", "--items", "200", "--workers", "2", "--json", env=env, timeout=280)
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["ok"] is True
        assert (result["items"], result["children"], result["distinct_keys"], result["succeeded"]) == (200,) * 4
        assert result["merge"] == "SUCCEEDED"
        assert set(result) >= {"seconds_total", "seconds_spawn", "children_per_s", "peak_rss_mb", "queries_per_child"}
    finally:
        params = connection.get_connection_params()
        params["dbname"] = "postgres"
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
