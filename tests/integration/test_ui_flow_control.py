"""The Rate Limits page's flow control (issue 29 §2-§4, issue 33 §2): the flow settings edited
through the API's service and rules (bad values refused per field, nothing written, every
change audited), the limit's history as it was, and the samples behind the sparklines."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse

from executions.core import flow_history
from executions.destinations import rules
from executions.models import Destination, DestinationCall, DestinationLimit, DestinationSample
from executions.selectors import destinations as destination_reads
from tests.support import helpers
from tests.support.clients import text
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
FLOW = {"concurrency_mode": "adaptive", "concurrency_min": "2", "max_cooldown_seconds": "60",
        "max_throttled_waits": "7", "breaker_on": "on", "breaker_failure_ratio": "0.25", "breaker_min_calls": "10",
        "breaker_window_seconds": "20", "breaker_open_seconds": "15"}


@pytest.fixture
def api(workspace) -> Destination:
    return rules.create_destination(workspace, name="api", base_url="http://127.0.0.1:9", concurrency_limit=16)


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_an_operator_edits_flow_control_through_the_apis_rules(operator, api):
    form = text(operator.get(reverse("ui:destination-flow-edit", args=[api.pk]), **HTMX))
    assert 'name="concurrency_min" value="1"' in form and 'name="max_cooldown_seconds" value="300"' in form
    response = operator.post(reverse("ui:destination-flow", args=[api.pk]), FLOW, **HTMX)
    assert response.status_code == 200, text(response)
    assert response["HX-Trigger"] == "sb-changed"  # the charts refresh at once
    d = Destination.objects.get(pk=api.pk)
    assert (d.concurrency_mode, d.concurrency_min, d.max_cooldown_seconds, d.max_throttled_waits) == (
        "adaptive", 2, 60.0, 7)
    assert d.breaker == {"failure_ratio": 0.25, "min_calls": 10, "window_seconds": 20.0, "open_seconds": 15.0}
    assert d.concurrency_current == 2  # adaptive starts at its floor
    row = text(response)
    assert "Flow control of 'api' saved" in row and "adaptive 2–16" in row
    event = AuditEvent.objects.get(action="destination.update", outcome="accepted")
    assert event.actor == "user:op" and event.target == f"destination:{api.pk}"
    assert event.detail["fields"] == ["breaker", "concurrency_min", "concurrency_mode", "max_cooldown_seconds",
                                      "max_throttled_waits"]
    assert event.detail["old"]["concurrency_mode"] == "fixed" and event.detail["old"]["breaker"] is None
    assert event.detail["new"]["max_throttled_waits"] == 7

    # Only what changes is sent: the breaker off, nothing else touched (no reset of the mode).
    response = operator.post(reverse("ui:destination-flow", args=[api.pk]), {**FLOW, "breaker_on": ""}, **HTMX)
    assert response.status_code == 200
    assert Destination.objects.get(pk=api.pk).breaker is None
    last = AuditEvent.objects.filter(action="destination.update").latest("id")
    assert last.detail["fields"] == ["breaker"]


@pytest.mark.parametrize(("fields", "shown"), [
    ({"concurrency_min": "0"}, "concurrency_min: must be a whole number from 1 to 1,000,000"),
    ({"concurrency_min": "20"}, "concurrency_min: must be at most concurrency_limit (16)"),
    ({"max_cooldown_seconds": "soon"}, "max_cooldown_seconds: must be a number of seconds in (0, 86400]"),
    ({"max_throttled_waits": "-1"}, "max_throttled_waits: must be a whole number from 0 to 1,000,000"),
    ({"breaker_failure_ratio": "1.5"}, "breaker: failure_ratio must be a number in (0, 1)"),
    ({"concurrency_mode": "turbo"}, "concurrency_mode: must be \"fixed\""),
])
def test_a_bad_flow_setting_is_refused_in_the_form_and_nothing_is_written(operator, api, fields, shown):
    response = operator.post(reverse("ui:destination-flow", args=[api.pk]), {**FLOW, **fields}, **HTMX)
    assert response.status_code == 400
    assert shown in text(response)
    d = Destination.objects.get(pk=api.pk)
    assert (d.concurrency_mode, d.concurrency_min, d.breaker, d.max_throttled_waits) == ("fixed", 1, None, 100)
    event = AuditEvent.objects.get(action="destination.update")
    assert event.outcome == "refused" and event.reason


def test_the_api_names_the_bad_key_of_a_breaker(operator, api):
    with pytest.raises(rules.Invalid) as refused:
        rules.update_destination(api, breaker={"min_calls": 0, "open_seconds": -1})
    assert refused.value.errors == [{"field": "breaker", "message": "min_calls must be a whole number from 1 to "
                                     "10,000; open_seconds must be a number of seconds in (0, 86,400]"}]
    with pytest.raises(rules.Invalid) as refused:
        rules.update_destination(api, breaker={"ratio": 0.5})
    assert "has no key 'ratio'" in refused.value.errors[0]["message"]


def test_the_limit_is_recorded_when_it_changes_and_charted_as_it_was(api):
    rules.update_destination(api, rate_per_second=5.0)  # not the limit: no row
    rules.update_destination(api, concurrency_limit=8)
    rules.update_destination(api, concurrency_mode="adaptive", concurrency_min=3)  # in force: the floor
    limits = list(DestinationLimit.objects.filter(destination=api).order_by("id").values_list("limit", flat=True))
    assert limits == [16, 8, 3]
    now = db_now()
    # As if the limit had been 16 until 10 min ago, 8 until 4 min ago, then 3.
    for row, ago in zip(DestinationLimit.objects.filter(destination=api).order_by("id"), (1000, 600, 240),
                        strict=True):
        DestinationLimit.objects.filter(pk=row.pk).update(created_at=now - timedelta(seconds=ago))
    DestinationCall.objects.create(destination=api, status_code=200, ok=True, latency_ms=5, created_at=now)
    buckets = destination_reads.history([api.pk], minutes=15, bucket_seconds=30)[api.pk]
    assert [b.limit for b in buckets] == [16] * 9 + [8] * 12 + [3] * 9  # a bucket shows the limit at its end
    assert buckets[-1].p95_ms == pytest.approx(5.0)


def test_samples_count_waiting_and_in_flight_once_per_period(workspace, api):
    helpers.publish(workspace, "post", {"start": "p", "vertices": {
        "p": {"type": "HTTP", "destination": "api", "method": "POST", "path": "/x"}}})
    for _ in range(3):
        helpers.start(workspace, "post", {})
    with connection.cursor() as cursor:
        assert flow_history.sample(cursor) == 1
        assert flow_history.sample(cursor) == 0  # the period is taken
    sample = DestinationSample.objects.get(destination=api)
    assert (sample.in_flight, sample.waiting) == (0, 3)
    DestinationCall.objects.create(destination=api, status_code=500, ok=False, latency_ms=40, created_at=db_now())
    buckets = destination_reads.history([api.pk], minutes=15, bucket_seconds=30)[api.pk]
    assert (buckets[-1].in_flight, buckets[-1].waiting, buckets[-1].errors) == (0, 3, 1)


def test_the_charts_show_four_sparklines_per_destination(operator, api):
    DestinationCall.objects.create(destination=api, status_code=500, ok=False, latency_ms=40, created_at=db_now())
    charts = text(operator.get("/rate-limits/charts", **HTMX))
    for series in ("in-flight", "waiting", "errors", "p95"):
        assert f'data-series="{series}"' in charts
    assert "<script" not in charts


def test_history_is_purged_with_the_call_log_keeping_the_limit_in_force(api):
    rules.update_destination(api, concurrency_limit=4)
    now = db_now()
    DestinationLimit.objects.filter(destination=api).update(created_at=now - timedelta(days=30))
    with connection.cursor() as cursor:
        assert flow_history.purge(cursor, age_seconds=86_400) == 1
    assert list(DestinationLimit.objects.filter(destination=api).values_list("limit", flat=True)) == [4]


def test_a_viewer_sees_flow_control_but_cannot_edit_it(workspace, api, viewer):
    page = text(viewer.get("/rate-limits/"))
    assert f'id="destination-{api.pk}-flow"' in page and "limit now" in page and "breaker off" in page
    assert "Edit the flow control" not in page
    assert viewer.get(reverse("ui:destination-flow-edit", args=[api.pk]), **HTMX).status_code == 403
    assert viewer.post(reverse("ui:destination-flow", args=[api.pk]), FLOW, **HTMX).status_code == 403
    assert Destination.objects.get(pk=api.pk).concurrency_mode == "fixed"
    assert AuditEvent.objects.get(action="destination.update").outcome == "refused"


def test_a_foreign_destinations_flow_control_is_not_found(operator, other_workspace):
    foreign = Destination.objects.create(workspace=other_workspace, name="theirs", base_url="http://127.0.0.1:9")
    assert operator.get(reverse("ui:destination-flow-edit", args=[foreign.pk]), **HTMX).status_code == 404
    assert operator.post(reverse("ui:destination-flow", args=[foreign.pk]), FLOW, **HTMX).status_code == 404
    assert Destination.objects.get(pk=foreign.pk).concurrency_mode == "fixed"


def test_the_flow_cell_says_when_a_destination_cools_down_or_its_breaker_is_open(operator, api):
    now = db_now()
    Destination.objects.filter(pk=api.pk).update(  # as flow.py would leave it
        cooling_until=now + timedelta(seconds=60), breaker={"failure_ratio": 0.5, "min_calls": 20,
                                                           "window_seconds": 30.0, "open_seconds": 30.0},
        breaker_state="open", breaker_open_until=now + timedelta(seconds=30))
    counts = text(operator.get("/rate-limits/counts", **HTMX))
    assert "cooling down until" in counts and "breaker open until" in counts
    assert 'data-breaker="open"' in counts
