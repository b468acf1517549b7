"""The bulk-operation benchmark runs (small, inline, inside the test transaction), in several
batches, and reports what it promises: every child matched and acted on once by each operation."""

import json

import pytest
from django.conf import settings

from bench import bulk
from tests.support import helpers

pytestmark = pytest.mark.django_db


def test_the_bulk_benchmark_retries_then_cancels_every_child_in_batches(workspace, monkeypatch):
    monkeypatch.setitem(settings.SB, "BULK_BATCH", 7)
    result = bulk.run(30, lambda parent, items: helpers.run_engine())
    json.dumps(result)  # JSON-able, as the command prints it
    assert result["items"] == 30 and result["batch"] == 7
    assert result["children"]["before"] == {"FAILED": 30}
    assert result["children"]["after cancel"] == {"CANCELLED": 30}
    for name in ("retry", "cancel"):
        operation = result[name]
        assert (operation["matched"], operation["done"], operation["skipped"], operation["state"]) == (
            30, 30, 0, "succeeded"), name
        assert operation["operations_finished"] == 1 and operation["run_seconds"] > 0, name
    assert result["retry"]["filter"] == {"status": ["FAILED"]}
    assert set(result["cancel"]["filter"]["status"]) == set(result["children"]["after retry"])
    assert result["checks"] and all(result["checks"].values()) and result["ok"] is True
