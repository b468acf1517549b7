"""The durable engine on real PostgreSQL: claims, leases and fencing, reaping, timers,
retries, timeouts, vertices, chaining, cancellation and idempotent starts (S5, S12, S13)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from executions.core import leases
from executions.engine import runner as engine
from executions.models import Destination, Event, Execution, Step
from executions.services import lifecycle as services
from tests.support import factories, handlers, helpers
from tests.support.httpserver import serve
from tests.support.threads import race
from workflows.dsl.ast import Retry
from workflows.errors import Conflict

pytestmark = pytest.mark.django_db


def seconds_until_due(step: Step) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM due_at - now()) FROM executions_step WHERE id = %s", [step.pk])
        return float(cursor.fetchone()[0])


# --- claims, leases, fencing -------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_never_claim_the_same_step():
    workspace = factories.default_workspace()
    helpers.publish(workspace, "noop", helpers.NOOP)
    for i in range(300):
        helpers.start(workspace, "noop", {"i": i})

    def claimer() -> list[int]:
        claimed: list[int] = []
        while batch := helpers.claim(25):
            claimed += [step.step_id for step in batch]
        return claimed

    claimed = race(claimer, claimer, claimer, claimer)
    everything = [step_id for ids in claimed for step_id in ids]
    assert len(everything) == len(set(everything)) == 300
    assert sum(1 for ids in claimed if ids) >= 2, "the claimers did not actually run concurrently"
    assert Step.objects.filter(status="RUNNING", lease_token__isnull=False).count() == 300
    assert Execution.objects.filter(status="PENDING").count() == 300, "a claim leaves executions alone"


def test_a_claim_gets_a_fresh_token_and_a_database_time_lease(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    execution = helpers.start(workspace, "noop", {})
    [run] = helpers.claim_runs()
    step = Step.objects.get(pk=run.step_id)
    assert step.status == "RUNNING" and step.lease_token == run.claimed.lease_token
    assert step.leased_by == leases.worker_label()
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM lease_expires_at - now()) FROM executions_step WHERE id = %s",
                       [step.pk])
        remaining = float(cursor.fetchone()[0])
    assert leases.lease_seconds() - 5 < remaining <= leases.lease_seconds()
    assert helpers.refresh(execution).status == "PENDING", "shown RUNNING once it visibly runs, not at the claim"


def test_a_stale_workers_result_is_fenced_off_and_noted(workspace):
    helpers.publish(workspace, "rec", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.record"}}})
    execution = helpers.start(workspace, "rec", {})
    [stale] = helpers.claim_runs()
    stale_outcome = engine.execute(stale)

    helpers.expire_lease(stale.step_id)
    assert engine.reap() == (1, 0)
    step = helpers.step(execution, "t")
    assert step.status == "READY" and step.attempt == 2 and step.lease_expiries == 1

    [current] = helpers.claim_runs()
    assert current.claimed.lease_token != stale.claimed.lease_token
    discarded = helpers.commit([(stale, stale_outcome)])
    assert [run.step_id for run in discarded] == [stale.step_id]
    assert helpers.step(execution, "t").status == "RUNNING", "a stale result must not move the step"
    assert Event.objects.filter(execution_id=execution.pk, message__startswith="discarded a late result").count() == 1

    assert helpers.commit([(current, engine.execute(current))]) == []
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED"
    assert helpers.step(execution, "t").attempt == 2


def test_expired_leases_are_reaped_then_the_step_fails_after_its_attempts(workspace):
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "retry": {"maxAttempts": 2}}}}
    helpers.publish(workspace, "poison", doc)
    execution = helpers.start(workspace, "poison", {})
    for expected_attempt in (1, 2):
        [run] = helpers.claim_runs()
        assert run.attempt == expected_attempt
        helpers.expire_lease(run.step_id)  # the worker "died" holding it
        engine.reap()
    step = helpers.step(execution, "t")
    assert step.status == "FAILED"
    assert step.error == "lease expired 2 times (its worker was lost each time); gave up after 2 attempts"
    execution = helpers.refresh(execution)
    assert execution.status == "FAILED" and "lease expired 2 times" in execution.error
    assert helpers.claim_runs() == []


def test_heartbeat_keeps_only_leases_still_held(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.start(workspace, "noop", {})
    helpers.start(workspace, "noop", {})
    first, second = helpers.claim_runs()
    helpers.expire_lease(second.step_id)
    engine.reap()
    with connection.cursor() as cursor:
        kept = leases.heartbeat(cursor, [first.claimed.lease, second.claimed.lease])
    assert kept == {first.step_id}


# --- timers, retries, timeouts ------------------------------------------------------------------

def test_a_timer_fires_only_when_due(workspace):
    doc = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "seconds": 3600, "next": "done"},
                                         "done": {"type": "SUCCEED"}}}
    helpers.publish(workspace, "timer", doc)
    execution = helpers.start(workspace, "timer", {})
    helpers.run_engine()
    step = helpers.step(execution, "wait")
    assert step.status == "READY" and step.wait_reason.startswith("timer until")
    assert 3590 < seconds_until_due(step) <= 3600

    helpers.run_engine()
    assert helpers.step(execution, "wait").status == "READY", "a timer must not fire early"

    helpers.make_due(execution)
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"


def test_a_timer_until_a_past_time_does_not_wait(workspace):
    doc = {"start": "wait", "vertices": {"wait": {"type": "TIMER", "until": "$.input.at"}}}
    helpers.publish(workspace, "until", doc)
    execution = helpers.start(workspace, "until", {"at": "2000-01-01T00:00:00Z"})
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"


def test_retries_back_off_by_the_due_time_then_fail(workspace):
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if",
                                            "retry": {"maxAttempts": 3, "backoffSeconds": 10,
                                                      "backoffMultiplier": 2}}}}
    helpers.publish(workspace, "retry", doc)
    execution = helpers.start(workspace, "retry", {"fail": True, "message": "boom"})
    helpers.run_engine()
    step = helpers.step(execution, "t")
    assert (step.status, step.attempt) == ("READY", 2)
    assert step.error == "RuntimeError: boom" and step.wait_reason.startswith("retry backoff")
    assert 9 < seconds_until_due(step) <= 10

    helpers.run_engine()
    assert helpers.step(execution, "t").attempt == 2, "a backed-off step is not claimed early"
    helpers.make_due(execution)
    helpers.run_engine()
    step = helpers.step(execution, "t")
    assert (step.status, step.attempt) == ("READY", 3)
    assert 19 < seconds_until_due(step) <= 20

    helpers.make_due(execution)
    helpers.run_engine()
    execution = helpers.refresh(execution)
    assert execution.status == "FAILED" and execution.error == "step 't' failed: RuntimeError: boom"


def test_backoff_formula_and_jitter_bounds():
    retry = Retry(max_attempts=5, backoff_seconds=2, backoff_multiplier=3, jitter=0.5)
    assert retry.delay(1, 0.5) == 2 and retry.delay(2, 0.5) == 6 and retry.delay(3, 0.5) == 18
    assert retry.delay(2, 0.0) == pytest.approx(3) and retry.delay(2, 0.9999) == pytest.approx(9, rel=1e-3)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_step_past_its_timeout_fails_its_attempt():
    workspace = factories.default_workspace()
    doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.sleep", "timeoutSeconds": 0.3,
                                            "retry": {"maxAttempts": 1}}}}
    helpers.publish(workspace, "slow", doc)
    execution = helpers.start(workspace, "slow", {"seconds": 5})
    helpers.run_engine(threads=2)
    execution = helpers.refresh(execution)
    assert execution.status == "FAILED"
    assert "timed out after" in helpers.step(execution, "t").error


# --- vertices ----------------------------------------------------------------------------------

def test_task_choice_and_succeed_thread_data_through_the_context(workspace):
    doc = {"start": "greet", "vertices": {
        "greet": {"type": "TASK", "handler": "demo.echo", "input": {"who": "$.input.who", "n": 2}, "next": "route"},
        "route": {"type": "CHOICE", "choices": [
            {"when": {"path": "$.steps.greet.output.n", "greaterThan": 5}, "next": "big"},
            {"when": {"and": [{"path": "$.steps.greet.output.who", "equals": "ops"},
                              {"not": {"path": "$.input.skip", "exists": True}}]}, "next": "small"}],
            "default": "big"},
        "big": {"type": "FAIL", "error": "too big"},
        "small": {"type": "SUCCEED", "output": {"hello": "$.steps.greet.output.who", "literal": "$$.input"}},
    }}
    helpers.publish(workspace, "ctx", doc)
    execution = helpers.start(workspace, "ctx", {"who": "ops"})
    helpers.run_engine()
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED"
    from executions import selectors

    assert selectors.payloads.output_of(execution) == {"hello": "ops", "literal": "$.input"}
    assert not Step.objects.filter(execution=execution, vertex="big").exists()


def test_fail_vertex_and_missing_paths_fail_visibly(workspace):
    helpers.publish(workspace, "fail", {"start": "f", "vertices": {"f": {"type": "FAIL", "error": "bad input",
                                                                         "cause": "no account"}}})
    execution = helpers.start(workspace, "fail", {})
    helpers.publish(workspace, "path", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo",
                                                                         "input": "$.input.missing"}}})
    missing = helpers.start(workspace, "path", {"other": 1})
    helpers.run_engine()
    assert helpers.refresh(execution).error == "FAIL 'f': bad input: no account"
    missing = helpers.refresh(missing)
    assert missing.status == "FAILED"
    assert missing.error == "step 't' failed: path $.input.missing: nothing at $.input.missing"
    assert helpers.step(missing, "t").attempt == 1, "a missing path is not retried"


def test_end_of_path_succeeds_with_the_last_steps_output(workspace):
    helpers.publish(workspace, "echo", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}})
    execution = helpers.start(workspace, "echo", {"x": [1, 2]})
    helpers.run_engine()
    from executions import selectors

    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED" and execution.output_vertex == "t"
    assert selectors.payloads.output_of(execution) == {"x": [1, 2]}


def test_chain_starts_an_independent_execution(workspace):
    helpers.publish(workspace, "next-piece", {"start": "t", "vertices": {"t": {"type": "TASK",
                                                                               "handler": "demo.echo"}}})
    helpers.publish(workspace, "first", {"start": "c", "vertices": {
        "c": {"type": "CHAIN", "workflow": "next-piece", "input": {"from": "first", "v": "$.input.v"}}}})
    first = helpers.start(workspace, "first", {"v": 7})
    helpers.run_engine()
    first = helpers.refresh(first)
    assert first.status == "SUCCEEDED"
    chained = Execution.objects.get(chained_from=first)
    assert chained.parent_id is None and chained.root_id == chained.pk and chained.depth == 0
    assert chained.workflow.key == "next-piece" and chained.status == "SUCCEEDED"
    from executions import selectors

    assert selectors.payloads.output_of(chained) == {"from": "first", "v": 7}
    assert selectors.payloads.output_of(first) == {"execution": str(chained.pk), "workflow": "next-piece"}


def test_chain_self_replaces_a_polling_loop(workspace):
    """Continue-as-new: each round is its own short execution; no execution ever loops."""
    doc = {"start": "inc", "vertices": {
        "inc": {"type": "TASK", "handler": "test.increment", "next": "check"},
        "check": {"type": "CHOICE", "choices": [
            {"when": {"path": "$.steps.inc.output.n", "greaterThanOrEquals": 4}, "next": "done"}],
            "default": "again"},
        "again": {"type": "CHAIN", "workflow": "self", "input": "$.steps.inc.output"},
        "done": {"type": "SUCCEED", "output": "$.steps.inc.output"},
    }}
    helpers.publish(workspace, "poller", doc)
    first = helpers.start(workspace, "poller", {"n": 0})
    helpers.run_engine()
    rounds = [first]
    while True:
        nxt = Execution.objects.filter(chained_from=rounds[-1]).first()
        if nxt is None:
            break
        rounds.append(nxt)
    assert [helpers.refresh(r).status for r in rounds] == ["SUCCEEDED"] * 4
    from executions import selectors

    assert selectors.payloads.output_of(helpers.refresh(rounds[-1])) == {"n": 4}


def test_http_vertex_calls_the_destination_with_the_stable_idempotency_key(workspace):
    with serve() as (url, recorder):
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5)
        doc = {"start": "call", "vertices": {
            "call": {"type": "HTTP", "destination": "api", "method": "PUT", "path": "/ok/{$.input.id}",
                     "body": {"id": "$.input.id", "n": 1}, "headers": {"X-Team": "ops"}}}}
        helpers.publish(workspace, "http", doc)
        execution = helpers.start(workspace, "http", {"id": "a b"})
        helpers.run_engine()
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", execution.error
    [request] = recorder.requests
    assert request["method"] == "PUT" and request["path"] == "/ok/a%20b"
    assert request["headers"]["Idempotency-Key"] == f"sb:{execution.pk}:call"
    assert request["headers"]["X-Team"] == "ops"
    from executions import selectors

    assert selectors.payloads.output_of(execution) == {"status": 200, "body": {"echo": {"id": "a b", "n": 1},
                                                                      "path": "/ok/a%20b"}}


@pytest.mark.parametrize(("path", "attempts", "status", "retried"), [
    ("/status/503", 2, "READY", True),
    ("/status/400", 1, "FAILED", False),
    ("/status/404", 1, "FAILED", False),
])
def test_http_errors_retry_on_5xx_and_fail_on_4xx(workspace, path, attempts, status, retried):
    """(A 429 is a throttled answer: it costs no attempt, tests/integration/test_destination_flow.py.)"""
    with serve() as (url, _):
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5)
        doc = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": "api", "path": path,
                                                      "retry": {"maxAttempts": 3, "backoffSeconds": 60}}}}
        helpers.publish(workspace, "http", doc)
        execution = helpers.start(workspace, "http", {})
        helpers.run_engine()
    step = helpers.step(execution, "call")
    assert (step.status, step.attempt) == (status, attempts)
    assert f"returned HTTP {path.rsplit('/', 1)[1]}" in step.error


def test_http_timeout_is_a_retryable_failure(workspace):
    with serve() as (url, _):
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=0.2)
        doc = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": "api", "path": "/slow/2",
                                                      "retry": {"maxAttempts": 2, "backoffSeconds": 60}}}}
        helpers.publish(workspace, "http", doc)
        execution = helpers.start(workspace, "http", {})
        helpers.run_engine()
    step = helpers.step(execution, "call")
    assert step.status == "READY" and "timed out after 0.2s" in step.error


def test_a_missing_destination_fails_the_step_clearly(workspace):
    doc = {"start": "call", "vertices": {"call": {"type": "HTTP", "destination": "nowhere"}}}
    helpers.publish(workspace, "http", doc)
    execution = helpers.start(workspace, "http", {})
    helpers.run_engine()
    assert helpers.refresh(execution).error == "step 'call' failed: no destination named 'nowhere' in this workspace"


# --- starts, cancellation ----------------------------------------------------------------------

def test_an_idempotency_key_returns_the_same_execution_and_refuses_a_different_request(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    first = services.start_execution(workspace, workflow="noop", input={"a": 1}, idempotency_key="k1")
    again = services.start_execution(workspace, workflow="noop", input={"a": 1}, idempotency_key="k1")
    assert first.created and not again.created and first.execution.pk == again.execution.pk
    with pytest.raises(Conflict, match="already used for a different request"):
        services.start_execution(workspace, workflow="noop", input={"a": 2}, idempotency_key="k1")
    assert Execution.objects.filter(idempotency_key="k1").count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_with_one_key_create_one_execution():
    workspace = factories.default_workspace()
    helpers.publish(workspace, "noop", helpers.NOOP)

    def start() -> Any:
        return services.start_execution(workspace, workflow="noop", input={"a": 1}, idempotency_key="same")

    results = race(*[start] * 8)  # any error in a thread is raised here
    assert len({r.execution.pk for r in results}) == 1 and sum(r.created for r in results) == 1
    assert Execution.objects.count() == 1 and Step.objects.count() == 1


def test_cancel_cascades_to_non_terminal_descendants_but_not_chained_work(workspace):
    doc = {"start": "t", "vertices": {"t": {"type": "TIMER", "seconds": 3600}}}
    helpers.publish(workspace, "slow-child", doc)
    helpers.publish(workspace, "parent", helpers.fanout_doc("slow-child"))
    parent = helpers.start(workspace, "parent", {"items": list(range(20))})
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.run_engine()
    assert helpers.child_counts(parent) == {"RUNNING": 20}
    with connection.cursor() as cursor:  # a chained execution is independent of its origin
        chained = helpers.start(workspace, "noop", {})
        cursor.execute("UPDATE executions_execution SET chained_from_id = %s WHERE id = %s", [parent.pk, chained.pk])

    assert services.cancel_execution(parent, actor="user:test") == 21
    assert helpers.refresh(parent).status == "CANCELLED"
    assert helpers.child_counts(parent) == {"CANCELLED": 20}
    assert not Step.objects.filter(execution__root=parent).exclude(status__in=["SUCCEEDED", "CANCELLED"]).exists()
    fan = parent.fanouts.get()
    assert (fan.cancelled, fan.succeeded, fan.failed) == (20, 0, 0)
    assert helpers.refresh(chained).status == "PENDING"
    with pytest.raises(Conflict, match="already CANCELLED"):
        services.cancel_execution(parent)


def test_quota_counts_top_level_starts(workspace):
    small = factories.make_workspace("tiny", quota=2)
    helpers.publish(small, "noop", helpers.NOOP)
    helpers.start(small, "noop", {})
    helpers.start(small, "noop", {})
    from workflows.errors import QuotaExceededError

    with pytest.raises(QuotaExceededError, match="quota exceeded: needs 1, remaining 0"):
        helpers.start(small, "noop", {})
    assert Execution.objects.filter(workspace=small).count() == 2


def test_every_transition_appends_an_event(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    execution = helpers.start(workspace, "noop", {})
    helpers.run_engine()
    transitions = list(Event.objects.filter(execution_id=execution.pk).values_list("vertex", "from_status",
                                                                                    "to_status"))
    assert transitions == [("t", "READY", "RUNNING"), ("t", "RUNNING", "SUCCEEDED"), ("", "PENDING", "SUCCEEDED")]
    with pytest.raises(Exception, match="immutable"), transaction.atomic():
        Event.objects.filter(execution_id=execution.pk).update(message="rewritten")


def test_handlers_see_attempts_and_a_stable_key(workspace):
    handlers.calls.clear()
    helpers.publish(workspace, "rec", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "test.record"}}})
    execution = helpers.start(workspace, "rec", {})
    [run] = helpers.claim_runs()
    helpers.expire_lease(run.step_id)
    engine.reap()
    helpers.run_engine()
    assert [(c[1], c[2]) for c in handlers.calls] == [("t", 2)]
    assert helpers.step(execution, "t").attempt == 2
    assert timedelta(0) <= (helpers.refresh(execution).finished_at - helpers.refresh(execution).started_at)


@pytest.mark.parametrize("bad", ["nul \x00 inside", {"k": "lone \ud800 surrogate"}, float("nan"), {"n": 1e400}])
def test_inputs_postgresql_cannot_store_are_refused_before_anything_is_written(workspace, bad):
    from workflows.errors import Invalid

    helpers.publish(workspace, "noop", helpers.NOOP)
    with pytest.raises(Invalid, match="input is not"):
        services.start_execution(workspace, workflow="noop", input=bad)
    assert not Execution.objects.exists()


def test_an_escaped_backslash_before_u0000_is_ordinary_text(workspace):
    helpers.publish(workspace, "echo", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}})
    execution = helpers.start(workspace, "echo", {"text": "C:\\u0000dir"})
    helpers.run_engine()
    from executions import selectors

    assert selectors.payloads.output_of(helpers.refresh(execution)) == {"text": "C:\\u0000dir"}


@pytest.mark.parametrize("key", ["", " leading-space", "tab\tkey", "nul\x00", "é", "x" * 256])
def test_idempotency_keys_are_printable_ascii(workspace, key):
    from workflows.errors import Invalid

    helpers.publish(workspace, "noop", helpers.NOOP)
    with pytest.raises(Invalid, match="idempotency key"):
        services.start_execution(workspace, workflow="noop", input={}, idempotency_key=key)


def test_a_malformed_execution_id_is_not_found(workspace):
    from workflows.errors import NotFound

    for bad in ("not-a-uuid", "00000000-0000-0000-0000-00000000000g", 42):
        with pytest.raises(NotFound):
            services.get_execution(workspace, bad)


def test_an_execution_is_shown_running_once_it_visibly_runs(workspace):
    """A claim leaves the execution PENDING; finishing its only step at once ends it straight
    from PENDING (one update); moving on to a next step, or waiting, starts it."""
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.publish(workspace, "two", {"start": "a", "vertices": {
        "a": {"type": "TASK", "handler": "demo.echo", "next": "wait"},
        "wait": {"type": "TIMER", "seconds": 3600}}})
    single, double = helpers.start(workspace, "noop", {}), helpers.start(workspace, "two", {})
    helpers.run_engine()
    single, double = helpers.refresh(single), helpers.refresh(double)
    assert single.status == "SUCCEEDED" and single.started_at is not None
    assert single.started_at <= single.finished_at
    assert double.status == "RUNNING" and double.started_at == helpers.step(double, "a").started_at
    transitions = list(Event.objects.filter(execution_id=double.pk, step__isnull=True)
                       .values_list("from_status", "to_status"))
    assert transitions == [("PENDING", "RUNNING")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_long_running_step_shows_its_execution_running_while_it_runs():
    workspace = factories.default_workspace()
    helpers.publish(workspace, "slow", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.sleep"}}})
    execution = helpers.start(workspace, "slow", {"seconds": 2})
    seen: list[str] = []

    def watch() -> None:
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not seen:
                if helpers.refresh(execution).status == "RUNNING":
                    seen.append("RUNNING")
                time.sleep(0.05)
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    helpers.run_engine(threads=2)
    watcher.join(timeout=30)
    assert seen == ["RUNNING"], "the execution must show RUNNING while its step runs"
    assert helpers.refresh(execution).status == "SUCCEEDED"


def test_a_version_hash_shared_by_two_workflows_needs_the_workflow_named(workspace):
    a = helpers.publish(workspace, "first-key", helpers.NOOP)
    helpers.publish(workspace, "second-key", helpers.NOOP)
    with pytest.raises(Conflict, match="belongs to several workflows \\('first-key', 'second-key'\\)"):
        services.start_execution(workspace, version=a.hash, input={})
    started = services.start_execution(workspace, workflow="second-key", version=a.hash, input={}).execution
    assert started.workflow.key == "second-key"
