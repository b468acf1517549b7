"""``manage.py bench fanout`` runs end to end and verifies its own result (not its timing)."""

from __future__ import annotations

import pytest

from tests.support.cluster import bench_database, bench_result

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_bench_fanout_200_is_ok(db):
    with bench_database("bench_smoke") as env:
        result = bench_result("fanout", "--items", "200", "--workers", "2", env=env)
        assert result["ok"] is True
        assert (result["items"], result["children"], result["distinct_keys"], result["succeeded"]) == (200,) * 4
        assert result["merge"] == "SUCCEEDED"
        assert set(result) >= {"seconds_total", "seconds_spawn", "children_per_s", "peak_rss_mb", "queries_per_child"}
