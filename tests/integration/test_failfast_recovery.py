"""S28: the seed's recovery story holds with the seed's own MERGE configuration
(``tolerateChildFailures: ["FAILED"]``, ``maxFailureRatio: 0.05``, ``failFast: true``).

A failFast merge that fails cancels the unfinished children and stops its spawner (S18).
Retrying the failed children — the API's ``retry-failed``, the UI's "Retry all failed", or
retrying the spawner step — re-runs the FAILED children *and* the ones the failFast policy
cancelled (not those an operator cancelled), and spawns the items never started, exactly
once each (same keys); the merge re-evaluates and the parent can succeed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Count

from executions.models import Execution, FanOutItem, Step
from tests.support import handlers, helpers
from tests.support.clients import api, ok

pytestmark = pytest.mark.django_db

ITEMS = 600
SEED_MERGE = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05}, "failFast": True}


# The child calls the destination (``test.flaky``: it refuses items with ``fail: true`` while
# the destination is down). Slow items wait first (a TIMER standing in for a slow call), so
# some children are still in flight when the merge fails.
CHILD = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.slow", "equals": True}, "next": "wait"}],
              "default": "call"},
    "wait": {"type": "TIMER", "seconds": 3600, "next": "call"},
    "call": {"type": "TASK", "handler": "test.flaky", "retry": {"maxAttempts": 1}},
}}


def _refused(index: int) -> bool:
    """The destination refuses one item in twelve (8.3%) until it is fixed."""
    return index % 12 == 5


def _slow(index: int) -> bool:
    return index % 10 == 3


def _run_until_quiet() -> None:
    """Run the engine, passing the slow children's timers, until nothing is left to run."""
    for _ in range(5):
        helpers.run_engine()
        if not Step.objects.filter(status__in=["READY", "RUNNING"]).exists():
            return
        helpers.make_due()


def _seed_fanout(workspace: Any, settings: Any, client: Any, items: int = ITEMS) -> str:
    """Start the seed's fan-out through the API and run it until the failFast merge fails.

    Small spawn batches, handed over after each one (``SPAWN_SLICE_SECONDS`` 0), let the
    children of early batches run — and fail — while the spawner is still walking the list,
    so the merge fails with children unfinished and items never started, deterministically."""
    settings.SB = {**settings.SB, "SPAWN_BATCH": 25, "SPAWN_SLICE_SECONDS": 0}
    handlers.set_flaky(True)  # the destination is down for some items
    helpers.publish(workspace, "child", CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config=SEED_MERGE))
    entries = [{"i": i, "fail": _refused(i), "slow": _slow(i)} for i in range(items)]
    parent = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {"items": entries}},
                            format="json"), 201)["id"]
    helpers.run_engine()
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "FAILED", detail
    assert "merge failed" in detail["error"]
    return str(parent)


def _fanout(client: Any, parent: str) -> dict[str, Any]:
    [fan] = ok(client.get(f"/api/v1/executions/{parent}"))["fanouts"]
    return fan


def _assert_recovered(client: Any, parent: str, items: int = ITEMS) -> None:
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "SUCCEEDED", (detail["error"], detail["fanouts"])
    per_item = (Execution.objects.filter(parent_id=parent).values("item_index").annotate(n=Count("id"))
                .order_by("item_index"))
    assert [(row["item_index"], row["n"]) for row in per_item] == [(i, 1) for i in range(items)], \
        "every item has exactly one child"
    assert helpers.child_counts(Execution.objects.get(pk=parent)) == {"SUCCEEDED": items}
    fan = _fanout(client, parent)
    assert fan["counts"]["SUCCEEDED"] == items and fan["spawn_complete"] and fan["created"] == items
    assert not FanOutItem.objects.filter(step__execution_id=parent).exists()


def test_the_seed_recovery_story_with_fail_fast(workspace: Any, settings: Any) -> None:
    client = api(workspace, "operator")
    parent = _seed_fanout(workspace, settings, client)
    before = _fanout(client, parent)["counts"]
    # The failure mode of the issue: stragglers cancelled and items never started.
    assert before["FAILED"] > 30 and before["CANCELLED"] > 0 and before["NEVER_STARTED"] > 0, before
    handlers.set_flaky(False)  # the destination is fixed
    retried = ok(client.post(f"/api/v1/executions/{parent}/children/retry-failed", format="json"))
    assert retried["retried"] == before["FAILED"] + before["CANCELLED"]
    _run_until_quiet()
    _assert_recovered(client, parent)
    # The re-run children kept their ids and keys: a new attempt each, never a second child.
    again = Execution.objects.filter(parent_id=parent, attempt=2)
    assert again.count() == before["FAILED"] + before["CANCELLED"]
