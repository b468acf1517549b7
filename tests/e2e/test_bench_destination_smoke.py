"""``manage.py bench destination`` runs end to end and verifies its own result (not its timing)."""

from __future__ import annotations

import os

import pytest

from tests.support.cluster import bench_database, bench_result

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_bench_destination_smoke_is_ok_and_never_exceeds_the_limit(db):
    with bench_database("bench_dest_smoke") as env:
        result = bench_result("destination", "--limit", "8", "--latency-ms", "20", "--items", "200",
                              "--background-items", "300", env=env)
        assert result["ok"] is True
        assert result["succeeded"] == 200 and result["merge"] == "SUCCEEDED"
        assert result["calls"] >= 200
        assert 0 < result["max_in_flight"] <= 8
        # Utilisation is the calls made against the Little's-law bound (limit ÷ latency).
        assert result["utilisation"] == pytest.approx(result["calls_per_s"] / result["bound_calls_per_s"], rel=0.01)
        assert set(result) >= {"calls_per_s", "bound_calls_per_s", "utilisation", "max_in_flight", "ok"}
        # Calls in flight per second of the run: one entry per second begun, never above the
        # limit, and together the same slot-seconds as the run's mean.
        by_second = result["in_flight_by_second"]
        assert len(by_second) == int(result["seconds"]) + 1
        assert all(0 <= busy <= 8 for busy in by_second)
        slot_seconds = result["mean_in_flight"] * result["seconds"]
        assert sum(by_second) == pytest.approx(slot_seconds, abs=0.05 * len(by_second) + 0.1)
        # The CPU per call by who used it, and the machine's own speed around the run.
        cpu = result["cpu_ms_per_call"]
        assert cpu["workers"] > 0 and cpu["database"] > 0 and 0 < cpu["cores_busy"] <= os.cpu_count()
        for when in ("before", "after"):
            assert result["machine"][when]["python_ms"] > 0 and result["machine"][when]["database_ms"] > 0
