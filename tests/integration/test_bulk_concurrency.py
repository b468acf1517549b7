"""Concurrent actions on one tree never deadlock into an error (issue 31 §5): a cancel (of the
execution, of its open children, or a bulk cancel) racing a retry (retry-failed, a bulk retry)
of the same parent either wins or is refused with a 409-kind ``ServiceError`` — never a
deadlock error (a 500) — and the tree ends consistent: every child's fan-out counters match."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from executions.models import Execution, FanOut
from executions.services import bulk as bulk_services
from executions.services import lifecycle as services
from tests.support import handlers, helpers
from tests.support.threads import race
from workflows.errors import ServiceError

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

ITEMS = 60
ROUNDS = 3


def tree(workspace: Any) -> Execution:
    """A running parent: a third of its children failed, the others waiting (slow)."""
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", helpers.SLOW_OR_FLAKY)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i % 3 == 0, "slow": i % 3 != 0}
                                                           for i in range(ITEMS)]})
    helpers.run_engine()
    return helpers.refresh(parent)


def refusal_allowed(work: Callable[[], Any]) -> Callable[[], Any]:
    """``work``, whose refusal (a ``ServiceError``: a 4xx) is its result; any other error raises."""
    def run() -> Any:
        try:
            return work()
        except ServiceError as error:
            return error
    return run


def assert_counters_match(parent: Execution) -> None:
    fanout = FanOut.objects.get(execution=parent)
    children = Execution.objects.filter(parent=parent)
    assert (fanout.succeeded, fanout.failed, fanout.cancelled) == (
        children.filter(status="SUCCEEDED").count(), children.filter(status="FAILED").count(),
        children.filter(status="CANCELLED").count())


def bulk(parent: Execution, action: str, terms: dict[str, Any]) -> Callable[[], int]:
    def work() -> int:
        bulk_services.start(parent, action, terms, actor="race")
        return bulk_services.run_due()
    return work


@pytest.mark.parametrize("cancel", ["execution", "open children", "bulk"])
@pytest.mark.parametrize("retry", ["retry-failed", "bulk", "one child"])
def test_a_cancel_and_a_retry_of_one_tree_at_once_never_fail_with_a_deadlock(workspace: Any, cancel: str,
                                                                              retry: str) -> None:
    for _ in range(ROUNDS):
        parent = tree(workspace)
        cancelling = {"execution": lambda p=parent: services.cancel_execution(p, actor="race"),
                      "open children": lambda p=parent: services.cancel_open_children(p, actor="race"),
                      "bulk": bulk(parent, "cancel", {"status": ["PENDING", "RUNNING"]})}[cancel]
        failed = Execution.objects.filter(parent=parent, status="FAILED").order_by("item_index")[0]
        retrying = {"retry-failed": lambda p=parent: services.retry_failed_children(p, actor="race"),
                    "bulk": bulk(parent, "retry", {"status": ["FAILED"]}),
                    "one child": lambda c=failed: services.retry_execution(c, actor="race")}[retry]
        race(refusal_allowed(cancelling), refusal_allowed(retrying), timeout=120)  # a deadlock error raises
        bulk_services.run_due()  # an operation the race left to another worker
        assert_counters_match(parent)
