"""The engine's metrics (issue 17): after in-process runs, the expected names carry the
counts of what happened. Counters are process-wide, so each test compares before and after."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from executions.engine import runner as engine
from executions.models import Destination
from tests.support import helpers
from tests.support.httpserver import serve

TOKEN = "metrics-token-for-tests"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def scrape(settings: Any, client: Client) -> Any:
    settings.SB = {**settings.SB, "METRICS_TOKEN": TOKEN}

    def read() -> Samples:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200
        return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(response.content.decode())
                for sample in family.samples}

    return read


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Any:
    """Run the engine so that commit-time counts happen (the test's transaction never commits)."""

    def run() -> None:
        with django_capture_on_commit_callbacks(execute=True):
            helpers.run_engine()

    return run


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_a_fan_out_counts_claims_outcomes_children_and_latencies(workspace, scrape, committed):
    retrying_child = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if",
                                                       "retry": {"maxAttempts": 2, "backoffSeconds": 600}}}}
    helpers.publish(workspace, "child", retrying_child)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    before = scrape()
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i == 3} for i in range(5)]})
    committed()
    middle = scrape()
    assert delta(before, middle, "schemabridge_children_created_total") == 5
    assert delta(before, middle, "schemabridge_children_finished_total", status="SUCCEEDED") == 4
    assert delta(before, middle, "schemabridge_steps_claimed_total", kind="SPAWNER") == 1
    assert delta(before, middle, "schemabridge_steps_claimed_total", kind="TASK") == 5
    assert delta(before, middle, "schemabridge_steps_succeeded_total", kind="TASK") == 4
    assert delta(before, middle, "schemabridge_steps_succeeded_total", kind="SPAWNER") == 1
    assert delta(before, middle, "schemabridge_steps_retried_total", kind="TASK") == 1
    # The failed child waits out its back-off: a due time ahead, nothing claimable now.
    assert middle[("schemabridge_timers_due", ())] == 1
    assert middle[("schemabridge_steps_ready", ())] == 0
    assert middle[("schemabridge_steps_running", ())] == 0
    assert middle[("schemabridge_payload_bytes", ())] > 0
    assert middle[("schemabridge_payload_capacity_bytes", ())] == 2 * 1024**3
    assert delta(before, middle, "schemabridge_claim_seconds_count") >= 2
    assert delta(before, middle, "schemabridge_commit_seconds_count") >= 2
    assert delta(before, middle, "schemabridge_claim_seconds_sum") > 0

    helpers.make_due()
    assert scrape()[("schemabridge_steps_ready", ())] == 1
    committed()
    after = scrape()
    assert delta(middle, after, "schemabridge_steps_failed_total", kind="TASK") == 1
    assert delta(middle, after, "schemabridge_children_finished_total", status="FAILED") == 1
    assert helpers.refresh(parent).status == "FAILED"  # the merge tolerates no failure by default
    assert after[("schemabridge_timers_due", ())] == 0


def test_a_rolled_back_commit_counts_nothing(workspace, scrape):
    """Counts follow the transaction: inside a transaction that never commits, nothing."""
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.start(workspace, "noop", {})
    before = scrape()
    helpers.run_engine()  # the test's transaction is rolled back at the end: no on_commit
    after = scrape()
    assert delta(before, after, "schemabridge_steps_succeeded_total", kind="TASK") == 0
    assert delta(before, after, "schemabridge_steps_claimed_total", kind="TASK") == 1  # a claim is an event


def test_reaping_counts_lease_expiries(workspace, scrape, django_capture_on_commit_callbacks):
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.start(workspace, "noop", {})
    helpers.claim()
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True):
        helpers.lose_leases()
    after = scrape()
    assert delta(before, after, "schemabridge_lease_expiries_total") == 1
    assert delta(before, after, "schemabridge_steps_reaped_total", outcome="requeued") == 1
    assert delta(before, after, "schemabridge_steps_reaped_total", outcome="failed") == 0


def test_destination_calls_latency_errors_and_slots(workspace, scrape, committed):
    with serve() as (url, _):
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5,
                                   concurrency_limit=4)
        helpers.publish(workspace, "ok", helpers.http_doc("api", "/ok"))
        helpers.publish(workspace, "broken", {"start": "call", "vertices": {"call": {
            "type": "HTTP", "destination": "api", "path": "/status/503", "retry": {"maxAttempts": 2}}}})
        helpers.start(workspace, "ok", {})
        helpers.start(workspace, "broken", {})
        claimed = helpers.claim()
        during = scrape()
        labels = {"workspace": workspace.slug, "destination": "api"}
        assert during[("schemabridge_destination_in_flight", tuple(sorted(labels.items())))] == 2
        assert during[("schemabridge_destination_concurrency_limit", tuple(sorted(labels.items())))] == 4
        for step in claimed:
            helpers.expire_lease(step.step_id)
        engine.reap()
        before = scrape()
        assert before[("schemabridge_destination_waiting", tuple(sorted(labels.items())))] == 2
        committed()
    after = scrape()
    assert delta(before, after, "schemabridge_destination_calls_total", **labels) == 2
    assert delta(before, after, "schemabridge_destination_call_seconds_count", **labels) == 2
    assert delta(before, after, "schemabridge_destination_errors_total", **labels, reason="http_5xx") == 1
    assert after[("schemabridge_destination_in_flight", tuple(sorted(labels.items())))] == 0
    assert after[("schemabridge_destination_waiting", tuple(sorted(labels.items())))] == 0


def test_drain_errors_are_counted(monkeypatch, db):
    """An unexpected error in a drain's turn is counted, and the drain goes on."""
    from executions.platform import metrics
    from executions.worker import Drain, loop, policy

    real_decide, decisions = policy.decide, []

    def decide(view: policy.DrainView) -> policy.Claim:
        decisions.append(view)
        if len(decisions) == 1:
            raise RuntimeError("boom")
        return real_decide(view)

    before = metrics.DRAIN_ERRORS.labels("unexpected")._value.get()
    monkeypatch.setattr(loop.policy, "decide", decide)
    monkeypatch.setattr(loop.time, "sleep", lambda seconds: None)  # the back-off after a failing turn
    Drain(threads=0, linger=False).run()
    assert metrics.DRAIN_ERRORS.labels("unexpected")._value.get() == before + 1
    assert len(decisions) == 2, "the drain went on to its next turn"


def test_counting_never_breaks_the_work(monkeypatch, caplog):
    from executions.platform import metrics

    def broken(*args: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(metrics.STEPS_CLAIMED, "labels", broken)
    metrics.steps_claimed([type("Run", (), {"vertex": type("V", (), {"type": "TASK"})()})()])
    assert "steps_claimed failed" in caplog.text


def test_docs_operations_lists_exactly_the_metrics_there_are(db):
    """docs/operations.md stays true: every metric it names exists, every metric is named."""
    import re

    from prometheus_client import Counter, Histogram

    from executions.platform import metrics
    from tests.support import ROOT

    events = {family.name + ("_total" if family.type == "counter" else "")
              for value in vars(metrics).values() if isinstance(value, Counter | Histogram)
              for family in value.describe()}
    state = {family.name for family in metrics.DatabaseCollector().collect()}
    documented = set(re.findall(r"`(schemabridge_[a-z_]+)`", (ROOT / "docs" / "operations.md").read_text()))
    assert documented == events | state


def test_a_batch_of_calls_is_counted_per_destination_and_reason(db, scrape):
    """One commit records calls to several destinations at once (counted per destination, not
    per call): every call, its latency and its error reason land on its own destination."""
    from executions.platform import metrics

    metrics._destination_labels.update({901: ("ws-a", "alpha"), 902: ("ws-b", "beta")})
    alpha, beta = {"workspace": "ws-a", "destination": "alpha"}, {"workspace": "ws-b", "destination": "beta"}
    before = scrape()
    metrics.destination_calls([(901, 1, 200, 0.01, ""), (902, 2, None, 0.5, "refused"), (901, 3, 503, 0.2, ""),
                               (901, 4, 404, 0.02, ""), (902, 5, 201, 0.03, ""), (901, 6, 502, 7.0, "")])
    after = scrape()
    assert delta(before, after, "schemabridge_destination_calls_total", **alpha) == 4
    assert delta(before, after, "schemabridge_destination_calls_total", **beta) == 2
    assert delta(before, after, "schemabridge_destination_call_seconds_count", **alpha) == 4
    assert delta(before, after, "schemabridge_destination_call_seconds_sum", **alpha) == pytest.approx(7.23)
    assert delta(before, after, "schemabridge_destination_call_seconds_sum", **beta) == pytest.approx(0.53)
    assert delta(before, after, "schemabridge_destination_errors_total", **alpha, reason="http_5xx") == 2
    assert delta(before, after, "schemabridge_destination_errors_total", **alpha, reason="http_4xx") == 1
    assert delta(before, after, "schemabridge_destination_errors_total", **beta, reason="no_response") == 1
    assert delta(before, after, "schemabridge_destination_errors_total", **beta, reason="http_5xx") == 0
