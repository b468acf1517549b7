"""Retry backoff (issue 14 §3, S16): an operator retry is a new round of the step's retry
policy, every wait is capped by ``maxBackoffSeconds``, and no policy, however large, makes
a database error."""

from __future__ import annotations

import pytest
from django.db import connection

from executions.services import lifecycle as services
from tests.support import helpers
from workflows.dsl import content_hash, parse
from workflows.dsl.ast import Retry


def seconds_until_due(step) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM due_at - now()) FROM executions_step WHERE id = %s", [step.pk])
        return float(cursor.fetchone()[0])


def failing_task(retry: dict) -> dict:
    return {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if", "retry": retry}}}


def fail_round(execution, attempts: int) -> None:
    for _ in range(attempts):
        helpers.make_due(execution)
        helpers.run_engine()


def test_an_operator_retry_starts_a_new_round_of_the_policy(workspace):
    helpers.publish(workspace, "flaky", failing_task({"maxAttempts": 3, "backoffSeconds": 10,
                                                      "backoffMultiplier": 2}))
    execution = helpers.start(workspace, "flaky", {"fail": True, "message": "down"})
    fail_round(execution, 3)
    assert helpers.refresh(execution).status == "FAILED"
    assert helpers.step(execution, "t").attempt == 3

    services.retry_execution(execution, actor="op")
    step = helpers.step(execution, "t")
    assert (step.status, step.attempt, step.max_attempts) == ("READY", 4, 6), "a full round: 3 more attempts"
    helpers.run_engine()
    step = helpers.step(execution, "t")
    assert (step.status, step.attempt) == ("READY", 5)
    assert 9 < seconds_until_due(step) <= 10, "the round's first wait is backoffSeconds again, not 10 × 2³"
    fail_round(execution, 1)
    assert 19 < seconds_until_due(helpers.step(execution, "t")) <= 20
    fail_round(execution, 1)
    assert helpers.refresh(execution).status == "FAILED"
    assert helpers.step(execution, "t").attempt == 6


def test_retry_all_failed_children_also_grants_a_new_round(workspace):
    helpers.publish(workspace, "child", failing_task({"maxAttempts": 2, "backoffSeconds": 30}))
    helpers.publish(workspace, "parent", helpers.fanout_doc("child"))
    parent = helpers.start(workspace, "parent", {"items": [{"fail": True}, {"fail": True}]})
    helpers.run_engine()
    fail_round(None, 1)  # every step: the children's
    assert helpers.child_counts(parent).get("FAILED") == 2
    assert services.retry_failed_children(helpers.refresh(parent), actor="op").retried == 2
    helpers.run_engine()
    for child in parent.children.all():
        step = helpers.step(child, "t")
        assert (step.status, step.attempt, step.max_attempts) == ("READY", 4, 4)
        assert 29 < seconds_until_due(step) <= 30


def test_every_wait_is_capped_by_max_backoff_seconds(workspace):
    helpers.publish(workspace, "capped", failing_task({"maxAttempts": 5, "backoffSeconds": 100,
                                                       "backoffMultiplier": 10, "maxBackoffSeconds": 300}))
    execution = helpers.start(workspace, "capped", {"fail": True})
    helpers.run_engine()
    assert 99 < seconds_until_due(helpers.step(execution, "t")) <= 100
    fail_round(execution, 1)
    assert 299 < seconds_until_due(helpers.step(execution, "t")) <= 300, "1,000 s capped at 300"


def test_the_default_cap_is_an_hour(workspace):
    helpers.publish(workspace, "daily", failing_task({"maxAttempts": 2, "backoffSeconds": 86400}))
    execution = helpers.start(workspace, "daily", {"fail": True})
    helpers.run_engine()
    assert 3599 < seconds_until_due(helpers.step(execution, "t")) <= 3600


def test_no_policy_however_large_makes_a_database_error(workspace):
    helpers.publish(workspace, "huge", failing_task({"maxAttempts": 100, "backoffSeconds": 86400,
                                                     "backoffMultiplier": 10, "maxBackoffSeconds": 2592000}))
    execution = helpers.start(workspace, "huge", {"fail": True})
    with connection.cursor() as cursor:  # deep into the round: 10^98 × a day without the cap
        cursor.execute("UPDATE executions_step SET attempt = 99 WHERE execution_id = %s", [execution.pk])
    helpers.run_engine()
    step = helpers.step(execution, "t")
    assert (step.status, step.attempt) == ("READY", 100)
    assert 2591999 < seconds_until_due(step) <= 2592000


def test_delay_never_overflows_and_stays_under_the_cap():
    retry = Retry(max_attempts=100, backoff_seconds=86400, backoff_multiplier=10, jitter=1.0,
                  max_backoff_seconds=60)
    for attempt in (1, 2, 50, 10_000, 10**9):
        for unit in (0.0, 0.5, 0.9999):
            assert 0 <= retry.delay(attempt, unit) <= 60


@pytest.mark.parametrize("explicit", [{}, {"maxBackoffSeconds": 3600}])
def test_the_new_field_leaves_existing_hashes_alone(explicit):
    plain = failing_task({"maxAttempts": 3})
    with_field = failing_task({"maxAttempts": 3, **explicit})
    assert content_hash(plain) == content_hash(with_field)
    assert "maxBackoffSeconds" not in str(parse(plain).to_dict())
