"""``manage.py bench callbacks`` runs end to end at a small size and its figures agree with
each other (never its timing): every callback accepted once, one of the duplicates changed
anything and the step resumed once, the event delivered to every waiting child."""

from __future__ import annotations

import json

import pytest

from tests.support.cluster import bench_database, manage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_bench_callbacks_small(transactional_db):
    with bench_database("callbacks") as env:
        done = manage("bench", "callbacks", "--items", "200", "--duplicates", "200", "--json", env=env, timeout=280)
    assert done.stdout.strip(), done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0 and result["ok"] is True, result
    assert result["callbacks"]["callbacks_accepted"] == 200 and result["callbacks"]["merge"] == "SUCCEEDED"
    assert result["duplicates"] == {**result["duplicates"], "copies": 200, "changed": 1, "resumed": 1}
    assert result["event"]["delivered"] == 200 and result["event"]["still_waiting_after_delivery"] == 0
