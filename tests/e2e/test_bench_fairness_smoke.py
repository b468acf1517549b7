"""``manage.py bench fairness`` (issue 30) runs end to end with tiny sizes, both variants, and its
figures agree with each other and with the exit code (never its timing: the machine is shared)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import bench_database, manage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def fairness(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = manage("bench", "fairness", *args, "--json", env=env, timeout=240)
    assert done.stdout.strip(), done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == (0 if result["ok"] else 1), done.stderr[-3000:]
    return result


def check(result: dict[str, Any], *, variant: str, items: int, fanouts: int) -> None:
    assert result["variant"] == variant and result["flood_items"] == items and result["flood_fanouts"] == fanouts
    assert result["small_items"] == 10 and result["workers"] == 1
    assert result["small_target_seconds"] == pytest.approx(2 * result["small_solo_seconds"] + 1.0, abs=0.002)
    assert result["small_solo_seconds"] > 0 and result["small_flooded_seconds"] > 0
    assert result["one_step_solo_seconds"] > 0 and result["one_step_flooded_seconds"] > 0
    assert 0 <= result["small_p95_start_seconds"] <= result["small_flooded_seconds"]
    assert result["flood_children_per_s_alone"] > 0 and result["flood_children_per_s_with_small"] > 0
    assert result["flood_ratio"] == pytest.approx(
        result["flood_children_per_s_with_small"] / result["flood_children_per_s_alone"], abs=0.001)
    assert result["ok"] == (result["small_flooded_seconds"] <= result["small_target_seconds"]
                            and result["one_step_flooded_seconds"] <= 1.0 and result["flood_ratio"] >= 0.9)
    # B's fan-out's timeline, in the order things happen (the database's own times).
    for when in ("solo", "flooded"):
        line = result["small_timeline"][when]
        assert all(value is not None for value in line.values()), (when, line)
        assert 0 <= line["spawner_claimed"] <= line["spawner_done"] and line["spawner_claimed"] <= line["children_done"]
        assert line["children_done"] <= line["merge_done"]
        assert line["children_claim_p50"] <= line["children_claim_p95"] <= line["children_claim_max"]
        assert line["merge_claimed"] <= line["merge_done"]


def test_bench_fairness_both_variants_run_and_their_figures_agree(db):
    with bench_database("bench_fairness_smoke") as env:
        single = fairness(env, "--items", "300", "--small-items", "10", "--workers", "1")
        check(single, variant="single", items=300, fanouts=1)
        sybil = fairness(env, "--items", "300", "--small-items", "10", "--workers", "1", "--sybil")
        check(sybil, variant="sybil", items=300, fanouts=50)
