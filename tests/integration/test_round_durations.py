"""Issue 33 §1: durations are of the latest round. A child retried long after it failed shows
how long its last attempt took (and the total with its attempts), and the parent's long tail
(p99, max, the ten slowest, the sort by duration) is computed from those, not from the first
start."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from executions.models import Execution
from executions.selectors import children as child_reads
from executions.selectors import fanouts as fanout_reads
from tests.support import handlers, helpers
from tests.support.clients import api, ok, text

pytestmark = pytest.mark.django_db

TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}


def test_a_child_retried_much_later_shows_its_last_attempts_duration(workspace, operator):
    handlers.set_flaky(True)
    parent = helpers.run_fanout(workspace, 6, failing={3}, child=helpers.FLAKY, merge_config=TOLERANT)
    child = Execution.objects.get(parent=parent, item_index=3)
    with connection.cursor() as cursor:  # it failed 20 minutes ago
        cursor.execute("UPDATE executions_execution SET started_at = started_at - interval '20 minutes', "
                       "attempt_started_at = attempt_started_at - interval '20 minutes' WHERE id = %s", [child.pk])
    handlers.set_flaky(False)
    client = api(workspace, "operator")
    ok(client.post(f"/api/v1/executions/{parent.id}/children/retry-failed", format="json"))
    helpers.run_engine()
    child = helpers.refresh(child)
    assert child.status == "SUCCEEDED" and child.attempt == 2
    assert child.duration is not None and child.duration < 60  # the last attempt: well under a minute
    assert child.total_duration is not None and child.total_duration >= 20 * 60

    body = ok(client.get(f"/api/v1/executions/{child.pk}"))
    assert body["duration_seconds"] < 60 and body["total_duration_seconds"] >= 1200
    assert body["attempt_started_at"] > body["started_at"]

    # The long tail counts the last attempt: nothing is 20 minutes long.
    tail = fanout_reads.long_tail(parent.pk)
    assert tail.max < 60 and all(c.seconds < 60 for c in tail.slowest)
    slowest_first = list(child_reads.by_duration(parent, "fan"))
    assert len(slowest_first) == 6  # every child ranked by its latest round

    row_html = text(operator.get(reverse("ui:execution-children", args=[parent.pk, "fan"]), HTTP_HX_REQUEST="true"))
    row = row_html[row_html.index('id="child-fan-3"'):]
    row = row[:row.index("</tr>")]
    assert "in all, 2 attempts)" in row and "min" in row.split("(")[1]  # the total: 20 min and more
    assert "min" not in row.split("(")[0].split("<td")[-1]  # the last attempt: seconds


def test_a_redrive_restarts_the_parents_round(workspace):
    handlers.set_flaky(True)
    parent = helpers.run_fanout(workspace, 3, failing={1}, child=helpers.FLAKY)
    assert parent.status == "FAILED"
    with connection.cursor() as cursor:  # it failed an hour ago
        cursor.execute("UPDATE executions_execution SET started_at = started_at - interval '1 hour', "
                       "attempt_started_at = attempt_started_at - interval '1 hour' WHERE id = %s", [parent.pk])
    first_round = helpers.refresh(parent).attempt_started_at
    handlers.set_flaky(False)
    ok(api(workspace, "operator").post(f"/api/v1/executions/{parent.id}/children/retry-failed", format="json"))
    parent = helpers.refresh(parent)
    assert parent.status == "RUNNING" and parent.attempt_started_at > first_round
    assert parent.started_at < parent.attempt_started_at
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED" and parent.duration < parent.total_duration
