"""A bulk retry survives the worker that runs it (issue 31 §5), on a real qcluster: the worker
process leasing the operation is SIGKILLed half-way through; its lease expires, another
worker takes the operation over at the ledger's next row, and every matched child is retried
exactly once (one FAILED → PENDING transition each, attempt 2), none twice, none lost."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from bench.chaos import lab as chaos_lab
from executions.models import BulkOperation, Event, Execution
from executions.services import bulk as bulk_services
from tests.support import helpers

pytestmark = [pytest.mark.fault, pytest.mark.e2e, pytest.mark.timeout(240)]

CHILDREN = 1200


def failed_fanout() -> Execution:
    """A parent whose CHILDREN children all failed (run in this process, before the cluster)."""
    space = chaos_lab.workspace()
    helpers.publish(space, "child", helpers.FAIL_IF)
    helpers.publish(space, "parent", helpers.fanout_doc())
    parent = helpers.start(space, "parent", {"items": [{"i": i, "fail": True} for i in range(CHILDREN)]})
    helpers.run_engine(max_seconds=120)
    assert Execution.objects.filter(parent=parent, status="FAILED").count() == CHILDREN
    return helpers.refresh(parent)


def test_a_bulk_retry_resumes_after_its_worker_is_killed_and_retries_each_child_once(lab: Any) -> None:
    chaos_lab.reset()
    parent = failed_fanout()
    # Small batches, so the operation is still running when its worker is killed.
    cluster = lab.cluster(SB_BULK_BATCH="10")
    try:
        started = bulk_services.start(parent, "retry", {"status": ["FAILED"]}, actor="fault-test")
        assert started.matched == CHILDREN

        def leased_mid_way() -> int | None:
            op = BulkOperation.objects.get(pk=started.operation)
            if op.leased_by and 0 < op.done < CHILDREN // 2:
                return int(op.leased_by.rsplit(":", 1)[1])
            return None

        pid = chaos_lab.wait_for(leased_mid_way, timeout=60, what="the operation's worker half-way")
        cluster.signal(pid, signal.SIGKILL)
        done_at_kill = BulkOperation.objects.get(pk=started.operation).done
        lab.say(f"killed worker {pid} with {done_at_kill} of {CHILDREN} children retried")

        def finished() -> BulkOperation | None:
            op = BulkOperation.objects.get(pk=started.operation)
            return op if op.state == "succeeded" else None

        op = chaos_lab.wait_for(finished, timeout=150, what="the operation finished by another worker")
    finally:
        cluster.stop()
    assert done_at_kill < CHILDREN
    assert (op.matched, op.done, op.skipped) == (CHILDREN, CHILDREN, 0)
    assert int(op.leased_by.rsplit(":", 1)[1]) != pid, "another worker finished it"
    retried = Event.objects.filter(execution__parent=parent, step__isnull=True, from_status="FAILED",
                                   to_status="PENDING", message__contains=str(op.pk))
    assert retried.count() == CHILDREN
    assert retried.values("execution").distinct().count() == CHILDREN, "no child retried twice"
    attempts = set(Execution.objects.filter(parent=parent).values_list("attempt", flat=True))
    assert attempts == {2}
