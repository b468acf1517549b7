"""Issue 30, `bench fairness --sybil`: a fair claim is not enough when a drain's threads are held
by one workspace's long steps. A SPAWNER holds its thread for up to SPAWN_SLICE_SECONDS; while
another root's claimed steps wait for a thread of its drain, it hands the thread back after its
current batch (platform/crowding.py) and the fair claim serves it again with everyone else."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.db.models import Max

from executions.models import Execution, Step
from executions.worker.loop import Drain
from executions.worker.pools import StepPool
from tests.support import factories, helpers

ITEMS = 1_000


def drain_with_one_thread() -> None:
    def run() -> None:
        try:
            Drain(max_seconds=120, idle_seconds=0, threads=1, batch=16, linger=False).run()
        finally:
            connection.close()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(180)
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_a_spawner_hands_its_thread_to_another_roots_waiting_step(transactional_db: Any, settings: Any) -> None:
    settings.SB = {**settings.SB, "SPAWN_BATCH": 50, "SPAWN_SLICE_SECONDS": 60}
    flood, small = factories.make_workspace("flood"), factories.make_workspace("small")  # flood first in the claim
    for workspace in (flood, small):
        helpers.publish(workspace, "child", helpers.NOOP)
        helpers.publish(workspace, "parent", helpers.fanout_doc())
    fan = helpers.start(flood, "parent", {"items": list(range(ITEMS))})
    one = helpers.start(small, "child", {})
    drain_with_one_thread()  # the first claim takes both ready steps: the spawner first, on the one thread
    one, fan = helpers.refresh(one), helpers.refresh(fan)
    assert one.status == "SUCCEEDED" and fan.status == "SUCCEEDED"
    last_child = Execution.objects.filter(parent=fan).aggregate(last=Max("created_at"))["last"]
    assert Execution.objects.filter(parent=fan).count() == ITEMS
    assert one.finished_at < last_child, "the one-step execution did not wait for the whole spawn"
    spawner = Step.objects.get(execution=fan, vertex="fan")
    assert spawner.attempt == 1, "a hand-over uses no attempt"


def test_the_pool_counts_only_other_roots_as_waiting() -> None:
    pool = StepPool(1)
    started, release = threading.Event(), threading.Event()
    try:
        pool.submit(lambda: (started.set(), release.wait(10)), owner="a")
        assert started.wait(10)
        assert not pool.others_waiting("a")
        pool.submit(lambda: None, owner="a")  # its own root's step queued: not someone else's
        assert not pool.others_waiting("a")
        pool.submit(lambda: None, owner="b")
        assert pool.others_waiting("a") and pool.others_waiting("b")
    finally:
        release.set()
        pool.shutdown()
