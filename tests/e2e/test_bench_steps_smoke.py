"""``manage.py bench steps`` runs end to end and verifies its own result (not its timing)."""

from __future__ import annotations

import pytest

from bench.steps import PHASES
from tests.support.cluster import bench_database, bench_result

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_bench_steps_smoke_runs_every_child_and_reports_every_phase(db):
    with bench_database("bench_steps_smoke") as env:
        result = bench_result("steps", "--items", "300", env=env)
        assert result["ok"] is True
        assert result["items"] == result["children"] == result["succeeded"] == 300
        for phase in PHASES:
            assert result[phase]["python_us"] > 0, phase
            assert result[phase]["database_us"] >= 0, phase
        total = sum(result[p]["python_us"] + result[p]["database_us"] for p in PHASES)
        assert result["total_us"] == pytest.approx(total, abs=0.5)
