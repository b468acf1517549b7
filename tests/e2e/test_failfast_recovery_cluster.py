"""S28 on real workers: the seed's recovery story with the seed's failFast MERGE, under a
qcluster of two worker processes (the spawner, the children, the merge and the retry's
re-opened spawner race each other for real)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Count, Q
from django.db.models.functions import Now

from executions.models import Execution, Step
from tests.support import factories, handlers, helpers
from tests.support.clients import api, ok
from tests.support.cluster import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ITEMS = 600


def test_the_seed_recovery_story_on_a_real_cluster(qcluster: Any) -> None:
    workspace = factories.default_workspace()
    handlers.set_flaky(True)  # the destination refuses one item in twelve (8.3%) until it is fixed
    helpers.publish(workspace, "child", helpers.SLOW_OR_FLAKY)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config=helpers.SEED_MERGE))
    client = api(workspace, "operator")
    entries = [{"i": i, "fail": i % 12 == 5, "slow": i % 10 == 3} for i in range(ITEMS)]
    parent = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {"items": entries}},
                            format="json"), 201)["id"]
    cluster = qcluster(workers=2, SB_HANDLER_MODULES="tests.support.handlers", SB_SPAWN_BATCH="25",
                       SB_SPAWN_SLICE_SECONDS="0")

    def status() -> str:
        return str(Execution.objects.get(pk=parent).status)

    wait_for(lambda: status() in ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=90, what="the merge to decide")
    # The destination is fixed, and the retry comes, as soon as nothing can still call it broken
    # (a child in flight could fail after the retry, which would rightly fail the merge again):
    # the spawner has stopped and no child has a step running or due. The slow children wait on
    # their timers (due in an hour), and the failFast sweep may still be cancelling them: a retry
    # meanwhile is safe, the two exclude each other (S28, docs/architecture.md "Lock order").
    def quiet() -> bool:
        spawner = Step.objects.get(execution_id=parent, vertex="fan").status
        due = Q(status="RUNNING") | Q(status="READY", due_at__lte=Now())
        return spawner in ("SUCCEEDED", "FAILED", "CANCELLED") and not \
            Step.objects.filter(due, execution__parent_id=parent).exists()

    wait_for(quiet, timeout=90, what="the spawner to stop and no child to be calling the destination")
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "FAILED" and "merge failed" in detail["error"], (detail, cluster.log()[-3000:])
    counts = detail["fanouts"][0]["counts"]
    assert counts["CANCELLED"] > 0, "the slow children were in flight: failFast cancelled them"
    print("after the failFast merge failed:", counts)  # how far the spawner got varies with the race
    handlers.set_flaky(False)  # the destination is fixed
    url = f"/api/v1/executions/{parent}/children/retry-failed"
    preview = ok(client.get(url))
    # No child can fail any more; the sweep may still cancel slow ones until the retry.
    assert preview["failed"] == counts["FAILED"] and preview["cancelled_by_fail_fast"] >= counts["CANCELLED"]
    retried = ok(client.post(url, format="json"))
    assert retried["failed"] == counts["FAILED"]
    assert retried["cancelled_by_fail_fast"] >= preview["cancelled_by_fail_fast"]
    after = ok(client.get(f"/api/v1/executions/{parent}"))["fanouts"][0]["counts"]
    assert (after["FAILED"], after["CANCELLED"]) == (0, 0), \
        ("the retry re-ran every failed and cancelled child, and no sweep cancelled one again", after)

    def finished() -> bool:
        helpers.make_due()  # the slow children's waits pass at once
        return status() in ("SUCCEEDED", "FAILED", "CANCELLED")

    wait_for(finished, timeout=120, what="the parent to finish after the retry", interval=0.5)
    detail = ok(client.get(f"/api/v1/executions/{parent}"))
    assert detail["status"] == "SUCCEEDED", (detail["error"], detail["fanouts"], cluster.log()[-3000:])
    per_item = (Execution.objects.filter(parent_id=parent).values("item_index").annotate(n=Count("id"))
                .order_by("item_index"))
    assert [(row["item_index"], row["n"]) for row in per_item] == [(i, 1) for i in range(ITEMS)]
    assert helpers.child_counts(Execution.objects.get(pk=parent)) == {"SUCCEEDED": ITEMS}
