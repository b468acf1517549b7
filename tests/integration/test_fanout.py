"""Fan-out on real PostgreSQL (S1–S10): exactly-once children, redelivery, merge rules,
quota, payload backpressure, operator retry and redrive."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from executions import selectors
from executions.core import leases, payloads, retention, versions
from executions.engine import runner as engine
from executions.fanout import spawn as fanout
from executions.models import Execution, FanOut, Step
from executions.services import lifecycle as services
from tests.support import factories, handlers, helpers
from tests.support.threads import race
from workflows.errors import Conflict

pytestmark = pytest.mark.django_db

FLAKY = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.flaky"}}}


class WorkerKilled(BaseException):
    """Stands in for SIGKILL: nothing after it runs, nothing is committed by the dead worker."""


def crash_after(monkeypatch: pytest.MonkeyPatch, batches: int, error: BaseException | None = None) -> list[int]:
    """Make the spawner die (or raise ``error``) when it is about to insert batch ``batches + 1``."""
    calls: list[int] = []
    original = fanout._insert_batch

    def insert(*args: Any, **kwargs: Any) -> int:
        if len(calls) == batches:
            raise error or WorkerKilled()
        calls.append(args[5])
        return original(*args, **kwargs)

    monkeypatch.setattr(fanout, "_insert_batch", insert)
    return calls


def child_keys(parent: Execution) -> list[int]:
    return list(Execution.objects.filter(parent=parent).order_by("item_index").values_list("item_index", flat=True))


# --- exactly-once children ------------------------------------------------------------------------

def test_a_redelivered_spawner_resumes_at_its_cursor_without_duplicates(workspace, monkeypatch, settings):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 250}
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(2000))})
    inserted = crash_after(monkeypatch, 3)
    with pytest.raises(WorkerKilled):
        helpers.run_engine()
    assert inserted == [0, 250, 500]
    spawner = helpers.step(parent, "fan")
    assert spawner.status == "RUNNING", "the dead worker's step stays leased until its lease expires"
    assert FanOut.objects.get(step=spawner).cursor == 750
    assert Execution.objects.filter(parent=parent).count() == 750

    monkeypatch.undo()
    helpers.lose_leases()
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED", parent.error
    assert child_keys(parent) == list(range(2000))
    spawner = helpers.step(parent, "fan")
    assert spawner.attempt == 2
    from executions import selectors as sel

    with connection.cursor() as cursor:
        output = payloads.load(cursor, [(parent.pk, "fan")])[(parent.pk, "fan")]
    assert output == {"children": 2000, "created": 1250, "relinked": 0}
    assert sel.fanouts.of(parent)[0].succeeded == 2000


def test_children_stay_pinned_to_the_version_resolved_at_spawn_time(workspace, monkeypatch, settings):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 10}
    v1 = helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(30))})
    crash_after(monkeypatch, 1)
    with pytest.raises(WorkerKilled):
        helpers.run_engine()
    monkeypatch.undo()
    v2 = helpers.publish(workspace, "child", {"start": "t", "vertices": {"t": {"type": "TASK",
                                                                               "handler": "demo.echo"}}})
    assert v2.pk != v1.pk
    helpers.lose_leases()
    helpers.run_engine()
    versions = set(Execution.objects.filter(parent=parent).values_list("version_id", flat=True))
    assert versions == {v1.pk}


def test_identical_items_are_distinct_children_keyed_by_position(workspace):
    helpers.publish(workspace, "child", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}})
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": ["same", "same", "same"]})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED"
    assert child_keys(parent) == [0, 1, 2]
    assert selectors.payloads.output_of(parent) == {"items": ["same", "same", "same"],
                                           "counts": {"SUCCEEDED": 3, "FAILED": 0, "CANCELLED": 0}}


def test_lineage_of_nested_fanouts(workspace):
    helpers.publish(workspace, "leaf", helpers.NOOP)
    helpers.publish(workspace, "middle", helpers.fanout_doc("leaf"))
    helpers.publish(workspace, "top", helpers.fanout_doc("middle", item_input={"items": "$.item"}))
    top = helpers.start(workspace, "top", {"items": [[1, 2], [3, 4, 5]]})
    helpers.run_engine()
    assert helpers.refresh(top).status == "SUCCEEDED"
    middles = list(Execution.objects.filter(parent=top).order_by("item_index"))
    leaves = Execution.objects.filter(parent__in=middles)
    assert [m.depth for m in middles] == [1, 1] and all(m.root_id == top.pk for m in middles)
    assert leaves.count() == 5 and {leaf.depth for leaf in leaves} == {2} and {leaf.root_id for leaf in leaves} == {
        top.pk}
    assert all(m.spawned_by_id == helpers.step(top, "fan").pk and m.spawn_vertex == "fan" for m in middles)


def test_item_input_template_sees_item_index_and_context(workspace):
    helpers.publish(workspace, "child", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}})
    helpers.publish(workspace, "parent", helpers.fanout_doc(item_input={
        "entry": "$.item.id", "position": "$.index", "batch": "$.input.batch", "fixed": "$$literal"}))
    parent = helpers.start(workspace, "parent", {"batch": "b-7", "items": [{"id": "x"}, {"id": "y"}]})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert selectors.payloads.output_of(parent)["items"] == [
        {"entry": "x", "position": 0, "batch": "b-7", "fixed": "$literal"},
        {"entry": "y", "position": 1, "batch": "b-7", "fixed": "$literal"},
    ]


@pytest.mark.parametrize(("data", "error"), [
    ({"items": {"not": "a list"}}, "items $.input.items: is a JSON object, not a list"),
    ({"other": []}, "items $.input.items: nothing there in the execution input"),
])
def test_a_bad_item_source_fails_the_spawner_visibly(workspace, data, error):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", data)
    helpers.run_engine()
    spawner = helpers.step(parent, "fan")
    assert spawner.status == "FAILED" and spawner.error == error
    assert helpers.refresh(parent).status == "FAILED"
    assert not Execution.objects.filter(parent=parent).exists()


def test_an_unknown_target_workflow_fails_the_spawner_visibly(workspace):
    helpers.publish(workspace, "parent", helpers.fanout_doc("missing-child"))
    parent = helpers.start(workspace, "parent", {"items": [1]})
    helpers.run_engine()
    assert helpers.step(parent, "fan").error == "no workflow 'missing-child' in this workspace"


@pytest.mark.django_db(transaction=True)
def test_two_spawners_racing_over_the_same_list_create_each_child_once(settings):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 100}
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(1500))})
    with transaction.atomic(), connection.cursor() as cursor:
        [run] = engine.load_runs(cursor, leases.claim(cursor, 1))
        fanout._plan(cursor, run, run.vertex)
    target = versions.get(FanOut.objects.get(step_id=run.step_id).target_version_id)
    start_vertex = target.workflow.vertices[target.workflow.start]
    created: list[int] = []

    def racer(order: range) -> None:
        for lo in order:
            with transaction.atomic(), connection.cursor() as cursor:
                created.append(fanout._insert_batch(cursor, run, run.vertex, target, start_vertex, lo,
                                                    min(lo + 100, 1500)))

    race(lambda: racer(range(0, 1500, 100)), lambda: racer(range(1400, -1, -100)))
    assert sum(created) == 1500
    assert Execution.objects.filter(parent=parent).count() == 1500
    assert Step.objects.filter(execution__parent=parent).count() == 1500
    assert child_keys(parent) == list(range(1500))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_commits", [False, True])
def test_a_racing_insert_waits_on_the_key_and_ends_with_one_child(first_commits):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [42]})
    with transaction.atomic(), connection.cursor() as cursor:
        [run] = engine.load_runs(cursor, leases.claim(cursor, 1))
        fanout._plan(cursor, run, run.vertex)
    target = versions.get(FanOut.objects.get(step_id=run.step_id).target_version_id)
    start_vertex = target.workflow.vertices[target.workflow.start]
    first_inserted, second_waiting, finish_first = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, int] = {}
    second_pid: list[int] = []

    def first() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                results["first"] = fanout._insert_batch(cursor, run, run.vertex, target, start_vertex, 0, 1)
                first_inserted.set()
                finish_first.wait(timeout=20)
                if not first_commits:
                    transaction.set_rollback(True)
        finally:
            connection.close()

    def second() -> None:
        try:
            first_inserted.wait(timeout=20)
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                second_pid.append(cursor.fetchone()[0])
                second_waiting.set()
                results["second"] = fanout._insert_batch(cursor, run, run.vertex, target, start_vertex, 0, 1)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    second_waiting.wait(timeout=20)
    deadline = time.monotonic() + 20
    with connection.cursor() as cursor:  # proceed only once the second insert blocks on the key
        while time.monotonic() < deadline:
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [second_pid[0]])
            if cursor.fetchone()[0] == "Lock":
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the second insert never waited on the first one's key")
    finish_first.set()
    for thread in threads:
        thread.join(timeout=30)
    assert results == ({"first": 1, "second": 0} if first_commits else {"first": 1, "second": 1})
    assert Execution.objects.filter(parent=parent).count() == 1
    assert Step.objects.filter(execution__parent=parent).count() == 1


# --- merge rules ------------------------------------------------------------------------------------

def merge_run(workspace, *, failures: int, total: int = 100, config: dict | None = None) -> Execution:
    handlers.set_flaky(True)
    return helpers.run_fanout(workspace, total, failing=range(failures), child=FLAKY, merge_config=config)


def test_default_merge_fails_on_any_failed_child(workspace):
    parent = merge_run(workspace, failures=1)
    assert parent.status == "FAILED"
    assert helpers.step(parent, "join").error.startswith(
        "merge failed: 99 succeeded, 1 failed, 0 cancelled of 100 (0 not finished); no failure tolerated")


def test_a_failure_ratio_within_tolerance_succeeds_with_outputs_in_item_order(workspace):
    parent = merge_run(workspace, failures=5, config={"tolerateChildFailures": ["FAILED"],
                                                      "failureTolerance": {"maxFailureRatio": 0.05}})
    assert parent.status == "SUCCEEDED", parent.error
    output = selectors.payloads.output_of(parent)
    assert output["counts"] == {"SUCCEEDED": 95, "FAILED": 5, "CANCELLED": 0}
    assert output["items"][:5] == [None] * 5
    assert output["items"][5:8] == [{"i": 5, "fail": False}, {"i": 6, "fail": False}, {"i": 7, "fail": False}]


def test_exceeding_the_ratio_fails_the_merge(workspace):
    parent = merge_run(workspace, failures=6, config={"tolerateChildFailures": ["FAILED"],
                                                      "failureTolerance": {"maxFailureRatio": 0.05}})
    assert parent.status == "FAILED"
    assert "tolerates FAILED up to 0.05 (5%) which allows 5" in helpers.step(parent, "join").error


def test_the_ratio_is_floored_exactly(workspace):
    parent = merge_run(workspace, failures=29, config={"tolerateChildFailures": ["FAILED"],
                                                       "failureTolerance": {"maxFailureRatio": 0.29}})
    assert parent.status == "SUCCEEDED", "29 of 100 is within 0.29 (binary floating point would allow 28)"
    assert FanOut.objects.get(execution=parent).allowed_failures == 29


def test_only_the_tolerated_statuses_are_tolerated(workspace):
    helpers.publish(workspace, "slow", {"start": "t", "vertices": {"t": {"type": "TIMER", "seconds": 3600}}})
    helpers.publish(workspace, "parent", helpers.fanout_doc("slow", merge_config={
        "tolerateChildFailures": ["CANCELLED"], "failureTolerance": {"maxFailureRatio": 0.5}}))
    parent = helpers.start(workspace, "parent", {"items": list(range(4))})
    helpers.run_engine()
    children = list(Execution.objects.filter(parent=parent).order_by("item_index"))
    services.cancel_execution(children[0])
    helpers.run_engine()
    assert helpers.step(parent, "join").status == "WAITING", "a tolerated cancellation only waits for the rest"
    services.cancel_execution(children[1])
    services.cancel_execution(children[2])
    helpers.run_engine()
    assert helpers.step(parent, "join").status == "WAITING", "without failFast the merge waits for every child"
    services.cancel_execution(children[3])
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "FAILED", "4 of 4 cancelled exceeds floor(0.5 × 4) = 2"

    handlers.set_flaky(True)
    helpers.publish(workspace, "child", FLAKY)
    helpers.publish(workspace, "parent2", helpers.fanout_doc(merge_config={
        "tolerateChildFailures": ["CANCELLED"], "failureTolerance": {"maxFailureRatio": 1}}))
    other = helpers.start(workspace, "parent2", {"items": [{"i": 0, "fail": True}, {"i": 1}]})
    helpers.run_engine()
    assert helpers.refresh(other).status == "FAILED", "FAILED is not tolerated when only CANCELLED is"


def straggler_child(workspace) -> None:
    helpers.publish(workspace, "child", {"start": "route", "vertices": {
        "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.slow", "equals": True}, "next": "wait"}],
                  "default": "work"},
        "wait": {"type": "TIMER", "seconds": 3600},
        "work": {"type": "TASK", "handler": "test.flaky"},
    }})


def test_fail_fast_finalises_without_waiting_and_cancels_the_stragglers(workspace):
    handlers.set_flaky(True)
    straggler_child(workspace)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.1}, "failFast": True}))
    items = [{"i": i, "slow": i < 2, "fail": i >= 7} for i in range(10)]
    parent = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "FAILED"
    assert helpers.step(parent, "join").status == "FAILED"
    # S18: the merge did not wait for the two stragglers, and they do not run on unwatched.
    assert helpers.child_counts(parent) == {"CANCELLED": 2, "SUCCEEDED": 5, "FAILED": 3}
    assert not Step.objects.filter(execution__parent=parent, status__in=["READY", "RUNNING", "WAITING"]).exists()


def test_without_fail_fast_the_merge_waits_for_every_child(workspace):
    handlers.set_flaky(True)
    straggler_child(workspace)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.1}}))
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "slow": i < 2, "fail": i >= 7}
                                                           for i in range(10)]})
    helpers.run_engine()
    join = helpers.step(parent, "join")
    assert join.status == "WAITING" and join.wait_reason.startswith("waiting for children")
    helpers.make_due()
    helpers.run_engine()
    assert helpers.refresh(parent).status == "FAILED"


# --- quota -------------------------------------------------------------------------------------------

def test_quota_refusal_creates_no_child_and_a_retry_resumes_after_raising_it(workspace):
    small = factories.make_workspace("small", quota=100)
    helpers.publish(small, "child", helpers.NOOP)
    helpers.publish(small, "parent", helpers.fanout_doc())
    parent = helpers.start(small, "parent", {"items": list(range(150))})
    helpers.run_engine()
    spawner = helpers.step(parent, "fan")
    assert spawner.status == "FAILED" and spawner.error == "quota exceeded: needs 150, remaining 99"
    assert not Execution.objects.filter(parent=parent).exists()
    assert not FanOut.objects.filter(execution=parent).exists()

    small.plan.executions_per_day = 1000
    small.plan.save()
    services.retry_step(parent, "fan", actor="user:ops")
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED" and helpers.child_counts(parent) == {"SUCCEEDED": 150}


@pytest.mark.django_db(transaction=True)
def test_concurrent_fanouts_cannot_both_pass_on_the_same_remaining_quota():
    small = factories.make_workspace("racing", quota=102)
    helpers.publish(small, "child", helpers.NOOP)
    helpers.publish(small, "parent", helpers.fanout_doc())
    parents = [helpers.start(small, "parent", {"items": list(range(60))}) for _ in range(2)]

    def drain() -> None:
        helpers.run_engine(batch=1)

    race(drain, drain, timeout=120)
    spawners = [helpers.step(parent, "fan") for parent in parents]
    assert sorted(s.status for s in spawners) == ["FAILED", "SUCCEEDED"]
    refused = next(s for s in spawners if s.status == "FAILED")
    assert refused.error == "quota exceeded: needs 60, remaining 40"
    assert Execution.objects.filter(workspace=small, parent__isnull=False).count() == 60


# --- payload backpressure -------------------------------------------------------------------------

def test_payload_pressure_defers_the_whole_fanout_until_retention_frees_space(workspace, settings):
    helpers.publish(workspace, "noop", helpers.NOOP)
    old = helpers.start(workspace, "noop", {"blob": "x" * 200_000})
    helpers.run_engine()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_execution SET finished_at = now() - interval '2 hours' WHERE id = %s",
                       [old.pk])
        used = payloads.pressure(cursor).used_bytes
    settings.SB = {**settings.SB, "PAYLOAD_CAPACITY_BYTES": used + 10_000, "PAYLOAD_HIGH_WATER": 0.8,
                   "PAYLOAD_RETENTION_SECONDS": 3600, "PAYLOAD_DEFER_SECONDS": 600}
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": list(range(50))})
    helpers.run_engine()
    spawner = helpers.step(parent, "fan")
    assert spawner.status == "READY" and spawner.attempt == 1
    assert spawner.wait_reason.startswith("payload pressure: payload store at")
    assert not Execution.objects.filter(parent=parent).exists() and not FanOut.objects.filter(execution=parent)

    helpers.make_due(parent)
    helpers.run_engine()
    assert helpers.step(parent, "fan").status == "READY", "still above the high-water mark: deferred again"

    with transaction.atomic(), connection.cursor() as cursor:
        assert retention.run_pass().payloads_deleted >= 1
        assert not payloads.pressure(cursor).above_high_water
    helpers.make_due(parent)
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED" and helpers.child_counts(parent) == {"SUCCEEDED": 50}


def test_payload_usage_is_accounted_by_the_database(workspace):
    with connection.cursor() as cursor:
        before = payloads.pressure(cursor).used_bytes
    helpers.publish(workspace, "noop", helpers.NOOP)
    execution = helpers.start(workspace, "noop", {"k": "v" * 1000})
    with connection.cursor() as cursor:
        after = payloads.pressure(cursor).used_bytes
        assert after - before == len(payloads.encode({"k": "v" * 1000}).encode())
        cursor.execute("DELETE FROM executions_payload WHERE execution_id = %s", [execution.pk])
        assert payloads.pressure(cursor).used_bytes == before


# --- operator retry and redrive --------------------------------------------------------------------

def test_retrying_the_one_failed_child_redrives_the_merge_to_success(workspace):
    parent = merge_run(workspace, failures=1, total=20)
    assert parent.status == "FAILED"
    failed_child = Execution.objects.get(parent=parent, status="FAILED")
    handlers.set_flaky(False)

    services.retry_execution(failed_child, actor="user:ops")
    assert helpers.refresh(parent).status == "RUNNING", "the parent re-opens while its child is retried"
    assert helpers.step(parent, "join").status == "WAITING"
    child = helpers.refresh(failed_child)
    assert (child.status, child.attempt, child.pk) == ("PENDING", 2, failed_child.pk)

    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED", parent.error
    assert helpers.refresh(failed_child).status == "SUCCEEDED"
    assert helpers.step(failed_child, "t").attempt == 2
    fan = FanOut.objects.get(execution=parent)
    assert (fan.succeeded, fan.failed) == (20, 0)


def test_retry_all_failed_children_in_bulk(workspace):
    parent = merge_run(workspace, failures=7, total=50)
    handlers.set_flaky(False)
    assert services.retry_failed_children(parent, actor="user:ops").retried == 7
    assert helpers.child_counts(parent) == {"SUCCEEDED": 43, "PENDING": 7}
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert services.retry_failed_children(parent).retried == 0


def test_retrying_a_failed_spawner_creates_only_never_started_children(workspace, monkeypatch, settings):
    settings.SB = {**settings.SB, "SPAWN_BATCH": 10}
    handlers.set_flaky(True)
    helpers.publish(workspace, "child", FLAKY)
    doc = helpers.fanout_doc()
    doc["vertices"]["fan"]["retry"] = {"maxAttempts": 1}
    helpers.publish(workspace, "parent", doc)
    items = [{"i": i, "fail": i in (3, 14)} for i in range(45)]
    parent = helpers.start(workspace, "parent", {"items": items})
    crash_after(monkeypatch, 2, error=RuntimeError("connection to the item store lost"))
    helpers.run_engine()
    monkeypatch.undo()
    spawner = helpers.step(parent, "fan")
    assert spawner.status == "FAILED" and spawner.error == "RuntimeError: connection to the item store lost"
    assert helpers.refresh(parent).status == "FAILED"
    assert helpers.child_counts(parent) == {"SUCCEEDED": 18, "FAILED": 2}
    failed_before = {c.pk: c.attempt for c in Execution.objects.filter(parent=parent, status="FAILED")}

    services.retry_step(parent, "fan", actor="user:ops")
    helpers.run_engine()
    assert child_keys(parent) == list(range(45))
    assert {c.pk: c.attempt for c in Execution.objects.filter(parent=parent, status="FAILED")} == failed_before
    with connection.cursor() as cursor:
        output = payloads.load(cursor, [(parent.pk, "fan")])[(parent.pk, "fan")]
    assert output == {"children": 45, "created": 25, "relinked": 0}


def test_refusals_for_retries_that_make_no_sense(workspace):
    parent = merge_run(workspace, failures=1, total=3)
    succeeded = Execution.objects.filter(parent=parent, status="SUCCEEDED").first()
    with pytest.raises(Conflict, match="only a FAILED execution can be retried; this one is SUCCEEDED"):
        services.retry_execution(succeeded)
    with pytest.raises(Conflict, match="step 'fan' is SUCCEEDED; only a FAILED step can be retried"):
        services.retry_step(parent, "fan")

    helpers.publish(workspace, "slow", {"start": "t", "vertices": {"t": {"type": "TIMER", "seconds": 3600}}})
    helpers.publish(workspace, "mixed", {"start": "fan", "vertices": {
        "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "hold"},
        "hold": {"type": "TIMER", "seconds": 3600}}})
    handlers.set_flaky(True)
    other = helpers.start(workspace, "mixed", {"items": [{"i": 0, "fail": True}]})
    helpers.run_engine()
    services.cancel_execution(other)
    child = Execution.objects.get(parent=other)
    assert child.status == "FAILED"
    with pytest.raises(Conflict, match="was cancelled"):
        services.retry_execution(child)
    with pytest.raises(Conflict, match="cancelled"):
        services.retry_failed_children(other)


def test_merge_state_is_explained_in_words(workspace):
    parent = merge_run(workspace, failures=3, total=1000, config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05}, "failFast": True})
    [view] = selectors.fanouts.of(parent)
    assert view.explanation == ("997 succeeded, 3 failed, 0 cancelled of 1,000 (0 not finished); "
                                "tolerates FAILED up to 0.05 (5%) which allows 50; failFast on")
    assert view.counts() == {"PENDING": 0, "RUNNING": 0, "SUCCEEDED": 997, "FAILED": 3, "CANCELLED": 0,
                             "NEVER_STARTED": 0}


def test_a_spawner_target_hash_shared_by_two_workflows_must_be_named(workspace):
    version = helpers.publish(workspace, "child-a", helpers.NOOP)
    helpers.publish(workspace, "child-b", helpers.NOOP)
    doc = helpers.fanout_doc()
    del doc["vertices"]["fan"]["workflow"]
    doc["vertices"]["fan"]["version"] = version.hash
    helpers.publish(workspace, "parent", doc)
    parent = helpers.start(workspace, "parent", {"items": [1, 2]})
    helpers.run_engine()
    assert helpers.step(parent, "fan").error == (f"version {version.hash[:12]} belongs to several workflows "
                                                 "('child-a', 'child-b'); name the workflow too")
    assert not Execution.objects.filter(parent=parent).exists()
