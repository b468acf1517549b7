"""The engine under a real qcluster subprocess."""

import pytest

from executions.models import Execution
from tests.support import factories, helpers
from tests.support.cluster import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_fanout_completes_on_a_real_cluster(qcluster):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    execution = helpers.start(workspace, "parent", {"items": list(range(500))})
    cluster = qcluster(workers=2)
    done = wait_for(lambda: Execution.objects.filter(pk=execution.pk, status="SUCCEEDED").exists()
                    or helpers.refresh(execution).is_terminal, timeout=90, what="the fan-out to finish")
    assert done
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", (execution.error, cluster.log()[-3000:])
    assert helpers.child_counts(execution) == {"SUCCEEDED": 500}


def test_a_multi_step_workflow_survives_kill_9_of_the_cluster(qcluster):
    """TASK → CHOICE → TIMER → HTTP → SUCCEED; the cluster is SIGKILLed while the HTTP call
    is in flight and a new cluster finishes it, re-running that step (at-least-once)."""
    from executions.models import Destination
    from tests.support.httpserver import serve

    workspace = factories.default_workspace()
    with serve() as (url, recorder):
        Destination.objects.create(workspace=workspace, name="ledger", base_url=url, timeout_seconds=30)
        doc = {"start": "prepare", "vertices": {
            "prepare": {"type": "TASK", "handler": "demo.echo", "input": {"id": "$.input.id"}, "next": "route"},
            "route": {"type": "CHOICE", "choices": [
                {"when": {"path": "$.steps.prepare.output.id", "exists": True}, "next": "pause"}],
                "default": "done"},
            "pause": {"type": "TIMER", "seconds": 1, "next": "write"},
            "write": {"type": "HTTP", "destination": "ledger", "path": "/slow/4", "body": "$.steps.prepare.output",
                      "next": "done"},
            "done": {"type": "SUCCEED", "output": "$.steps.write.output.body"},
        }}
        helpers.publish(workspace, "multi", doc)
        execution = helpers.start(workspace, "multi", {"id": "e-1"})
        first = qcluster(workers=2, SB_LEASE_SECONDS="3")
        wait_for(lambda: len(recorder.requests) == 1, timeout=60, what="the HTTP call to be in flight")
        first.kill()
        assert helpers.step(execution, "write").status == "RUNNING"

        second = qcluster(workers=2, SB_LEASE_SECONDS="3")
        wait_for(lambda: helpers.refresh(execution).is_terminal, timeout=90, what="the execution to finish")
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", (execution.error, second.log()[-3000:])
    write = helpers.step(execution, "write")
    assert write.attempt == 2 and write.lease_expiries == 1
    keys = {request["headers"]["Idempotency-Key"] for request in recorder.requests}
    assert len(recorder.requests) == 2 and keys == {f"sb:{execution.pk}:write"}
    assert [s.attempt for s in Execution.objects.get(pk=execution.pk).steps.order_by("id")] == [1, 1, 1, 2, 1]


def test_a_stopping_cluster_hands_its_running_steps_back_at_once(qcluster):
    """SIGTERM (an orderly stop): drains notice their cluster stopping, claim nothing more,
    and release steps still running so another worker takes them without waiting for the
    lease to expire (and without consuming an attempt)."""
    from executions.models import Event

    workspace = factories.default_workspace()
    doc = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.sleep", "timeoutSeconds": 120}}}
    helpers.publish(workspace, "long", doc)
    execution = helpers.start(workspace, "long", {"seconds": 60})
    first = qcluster(workers=2, SB_LEASE_SECONDS="60")
    wait_for(lambda: helpers.step(execution, "work").status == "RUNNING", timeout=60, what="the step to start")
    first.terminate(timeout=20)  # a deadline: the orderly stop hands the step back, it does not wait it out
    step = helpers.step(execution, "work")
    assert (step.status, step.attempt, step.lease_expiries) == ("READY", 1, 0)
    assert Event.objects.filter(step=step, message="released: its worker is shutting down").exists()


def test_sb_run_waits_shows_progress_and_exits_by_the_outcome(qcluster):
    import io

    from django.core.management import call_command

    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    qcluster(workers=2)
    out, err = io.StringIO(), io.StringIO()
    call_command("sb_run", "parent", "--input", '{"items": [{"n": 1}, {"n": 2}]}', "--wait", "--timeout", "90",
                 stdout=out, stderr=err)
    status, execution_id = out.getvalue().split()
    assert status == "SUCCEEDED" and Execution.objects.get(pk=execution_id).status == "SUCCEEDED"
    assert "started execution" in err.getvalue() and "fan: 2/2 done" in err.getvalue()

    with pytest.raises(SystemExit) as exited:
        call_command("sb_run", "parent", "--input", '{"items": [{"fail": true}]}', "--wait", "--timeout", "90",
                     stdout=io.StringIO(), stderr=(err := io.StringIO()))
    assert exited.value.code == 1
    assert "error: step 'join' failed: merge failed" in err.getvalue()


def test_a_thousand_item_fanout_with_failures_through_a_tolerant_merge(qcluster):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc(merge_config={
        "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05}, "failFast": True}))
    items = [{"i": i, "fail": i % 40 == 0} for i in range(1000)]  # 25 failures: within 5% (50)
    execution = helpers.start(workspace, "parent", {"items": items})
    qcluster(workers=2)
    wait_for(lambda: helpers.refresh(execution).is_terminal, timeout=120, what="the fan-out to finish")
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", execution.error
    assert helpers.child_counts(execution) == {"SUCCEEDED": 975, "FAILED": 25}
    fan = execution.fanouts.get()
    assert (fan.total, fan.created, fan.succeeded, fan.failed) == (1000, 1000, 975, 25)
    from executions import selectors

    output = selectors.payloads.output_of(execution)
    assert output["counts"] == {"SUCCEEDED": 975, "FAILED": 25, "CANCELLED": 0}
    assert output["items"][0] is None and output["items"][1] == {"i": 1, "fail": False}


def test_the_optional_redis_broker_runs_the_engine(qcluster):
    """With REDIS_URL set, django-q2 moves drain tasks through Redis instead of the database
    (the engine's state stays in PostgreSQL either way)."""
    import os

    import redis

    url = os.environ.get("SB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {url}: the optional broker cannot be exercised on this machine")
    client.flushdb()
    try:
        workspace = factories.default_workspace()
        helpers.publish(workspace, "child", helpers.NOOP)
        helpers.publish(workspace, "parent", helpers.fanout_doc())
        execution = helpers.start(workspace, "parent", {"items": list(range(300))})
        cluster = qcluster(workers=2, REDIS_URL=url)
        wait_for(lambda: helpers.refresh(execution).is_terminal, timeout=90, what="the fan-out to finish")
        assert helpers.refresh(execution).status == "SUCCEEDED", cluster.log()[-3000:]
        assert helpers.child_counts(execution) == {"SUCCEEDED": 300}
        assert any(True for _ in client.scan_iter(match="django_q*")), "the cluster used Redis"
    finally:
        client.flushdb()
