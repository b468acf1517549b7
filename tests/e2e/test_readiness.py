"""/readyz follows the real workers: 503 before a qcluster runs, 200 once it has published its
status (django-q2's Stat, in the shared cache table), 503 again after it stopped."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.cluster import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_readyz_follows_a_live_qcluster(qcluster):
    client = Client()
    before = client.get("/readyz")
    assert before.status_code == 503 and before.json()["workers"] == 0
    cluster = qcluster(workers=2)
    ready = wait_for(lambda: (r := client.get("/readyz")).status_code == 200 and r, timeout=60,
                     what="/readyz to see the cluster", interval=0.5)
    assert ready.json() == {"ok": True, "database": True, "migrations": True, "workers": 2}
    cluster.terminate()
    gone = wait_for(lambda: (r := client.get("/readyz")).status_code == 503 and r, timeout=40,
                    what="/readyz to notice the cluster stopped", interval=0.5)
    assert gone.json()["workers"] == 0
