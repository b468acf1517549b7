"""S18 × S28: a failFast sweep and a retry of the failed children exclude each other.

Once a failFast merge has failed, the fan-out's unfinished children are swept (cancelled,
cause failFast) in bounded transactions — by the merge before it fails, and by the spawner
after its stop, for children a batch committed after the merge swept. A retry of the failed
children that lands while such a sweep is under way must neither miss what the sweep
cancelled so far (it re-runs those too) nor be undone by the sweep's later batches (they see
that the retry brought the fan-out back under its tolerance, and stop): after one retry the
parent succeeds, each item with exactly one child.

The state every test starts from: a failFast merge failed with slow children still open, as
when the spawner's last batch committed after the merge had swept (the merge's own sweep is
left out to get there); the sweep under test is the spawner's, through its public function
(``cancel.cancel_descendants``, cause failFast) with small batches."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from executions.core import cancel, state
from executions.fanout import merge
from executions.models import CancelCause, Execution, Step
from executions.platform import transient
from executions.services import lifecycle as services
from tests.support import factories, handlers, helpers
from tests.support.cluster import wait_for

ITEMS = 40
FAILING = (0, 7)  # the destination refuses these items until it is fixed; the others are slow
SWEEP_BATCH = 5
MESSAGE = "cancelled: failFast stopped spawner 'fan'"


def _failed_fan_out(workspace: Any, monkeypatch: Any) -> Execution:
    """A parent whose failFast merge failed on FAILING, its other children still waiting."""
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", helpers.SLOW_OR_FLAKY)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={"failFast": True}))
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i in FAILING, "slow": i not in FAILING}
                                                           for i in range(ITEMS)]})
    with monkeypatch.context() as patch:
        patch.setattr(merge, "_stop_children_on_failfast", lambda step, vertex: None)
        helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "FAILED" and helpers.step(parent, "join").status == "FAILED"
    assert helpers.child_counts(parent) == {"FAILED": len(FAILING), "RUNNING": ITEMS - len(FAILING)}
    monkeypatch.setattr(cancel, "SWEEP_BATCH", SWEEP_BATCH)
    return parent


def _sweep(parent: Execution) -> int:
    return cancel.cancel_descendants(parent.pk, spawner="fan", cause=CancelCause.FAIL_FAST, message=MESSAGE)


def _assert_the_retry_held(parent: Execution) -> None:
    """Nothing the retry re-ran is cancelled again, and the parent then succeeds."""
    assert helpers.child_counts(parent).get("CANCELLED", 0) == 0, helpers.child_counts(parent)
    handlers.set_flaky(False)
    for _ in range(5):
        helpers.make_due()
        helpers.run_engine()
        if not Step.objects.filter(execution__root=parent, status__in=["READY", "RUNNING"]).exists():
            break
    assert helpers.refresh(parent).status == "SUCCEEDED", helpers.child_counts(parent)
    assert helpers.child_counts(parent) == {"SUCCEEDED": ITEMS}
    assert sorted(Execution.objects.filter(parent=parent).values_list("item_index", flat=True)) == \
        list(range(ITEMS)), "one child per item"


@pytest.mark.django_db
def test_a_sweep_batch_after_a_retry_does_not_cancel_the_re_run_children(workspace: Any, monkeypatch: Any) -> None:
    parent = _failed_fan_out(workspace, monkeypatch)
    original = transient.retrying
    retried: list[Any] = []

    def retry_after_the_first_batch(work: Any) -> Any:
        result = original(work)
        if not retried:  # the first batch has committed: the operator retries now
            retried.append(services.retry_failed_children(parent, actor="op"))
        return result

    monkeypatch.setattr(transient, "retrying", retry_after_the_first_batch)
    swept = _sweep(parent)
    [counts] = retried
    assert (counts.failed, counts.cancelled_by_fail_fast) == (len(FAILING), SWEEP_BATCH), \
        "the retry re-ran the failed children and the ones the first batch cancelled"
    assert swept == SWEEP_BATCH, "the sweep stopped at the retry: the fan-out is back under its tolerance"
    assert helpers.refresh(parent).status == "RUNNING"
    _assert_the_retry_held(parent)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_retry_waits_for_the_sweep_batch_in_flight_and_re_runs_what_it_cancelled(monkeypatch: Any) -> None:
    parent = _failed_fan_out(factories.default_workspace(), monkeypatch)
    original = state.cancel_executions
    holding, go = threading.Event(), threading.Event()

    def hold_the_first_batch(*args: Any, **kwargs: Any) -> Any:
        moved = original(*args, **kwargs)
        if not holding.is_set():  # the first batch has cancelled its children; it commits on ``go``
            holding.set()
            assert go.wait(60), "the test never let the sweep batch commit"
        return moved

    monkeypatch.setattr(state, "cancel_executions", hold_the_first_batch)
    outcome: dict[str, Any] = {}

    def retry() -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            outcome["retry_pid"] = cursor.fetchone()[0]
        return services.retry_failed_children(parent, actor="op")

    sweeper = helpers.in_thread(outcome, "sweep", lambda: _sweep(parent))
    assert holding.wait(30), "the sweep's first batch never ran"
    retrier = helpers.in_thread(outcome, "retry", retry)
    wait_for(lambda: "retry_pid" in outcome and helpers.waiting_for_a_lock(outcome["retry_pid"]), timeout=30,
             what="the retry to wait for the sweep batch in flight")
    go.set()
    for thread in (sweeper, retrier):
        thread.join(60)
        assert not thread.is_alive()
    assert not isinstance(outcome["sweep"], BaseException), outcome["sweep"]
    assert not isinstance(outcome["retry"], BaseException), outcome["retry"]
    counts = outcome["retry"]
    assert (counts.failed, counts.cancelled_by_fail_fast) == (len(FAILING), outcome["sweep"]), \
        "the retry re-ran every child the sweep had cancelled before it"
    _assert_the_retry_held(parent)
