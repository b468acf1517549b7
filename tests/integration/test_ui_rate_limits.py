"""The Rate Limits page: live counts, inline limit edits with validation and an audit
record of who changed what, destination creation, and the demo ledger's switch."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from demo import ledger as demo_ledger
from demo import workflows as demo_workflows
from executions.models import Destination
from tests.support import helpers
from tests.support.clients import client_for, text
from workflows.models import AuditEvent, Role

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def ledger(workspace) -> Destination:
    demo_workflows.load(workspace, base_url="http://127.0.0.1:9")
    return Destination.objects.get(workspace=workspace, name="demo-ledger")


def limit_url(destination) -> str:
    return reverse("ui:destination-limit", args=[destination.pk])


def test_the_page_lists_destinations_with_live_counts(operator, ledger, workspace):
    helpers.publish(workspace, "post", {"start": "p", "vertices": {
        "p": {"type": "HTTP", "destination": "demo-ledger", "method": "POST", "path": "/entries"}}})
    for _ in range(3):
        helpers.start(workspace, "post", {})
    page = text(operator.get("/rate-limits/"))
    assert "demo-ledger" in page and 'data-limit="8"' in page
    assert "refuses ~3% of entries" in page  # the demo switch sits next to it
    counts = text(operator.get("/rate-limits/counts", **HTMX))
    # Out-of-band cells: the poller swaps only these, so a row being edited is untouched.
    assert f'<td class="num" id="destination-{ledger.pk}-waiting" hx-swap-oob="true">3</td>' in counts
    assert f'id="destination-{ledger.pk}-in-flight" hx-swap-oob="true">0</td>' in counts


def test_an_operator_edits_a_limit_inline(operator, ledger):
    edit = operator.get(reverse("ui:destination-edit", args=[ledger.pk]), **HTMX)
    assert 'name="concurrency_limit" value="8"' in text(edit)
    response = operator.post(limit_url(ledger), {"concurrency_limit": " 3 "}, **HTMX)
    assert response.status_code == 200
    assert "Limit of 'demo-ledger' set to 3 (was 8)." in text(response)
    assert Destination.objects.get(pk=ledger.pk).concurrency_limit == 3
    assert operator.post(limit_url(ledger), {"concurrency_limit": ""}, **HTMX).status_code == 200
    assert Destination.objects.get(pk=ledger.pk).concurrency_limit is None  # empty = unlimited
    changes = AuditEvent.objects.filter(action="destination.update").order_by("id")
    assert [(e.actor, e.outcome, e.detail["old"], e.detail["new"]) for e in changes] == [
        ("user:op", "accepted", 8, 3), ("user:op", "accepted", 3, None)]
    assert changes[0].detail["name"] == "demo-ledger"


LIMIT_RULE = "concurrency_limit: must be a whole number from 0 to 1,000,000, or empty for unlimited"


@pytest.mark.parametrize(("value", "message"), [
    ("-1", LIMIT_RULE),
    ("2.5", LIMIT_RULE),
    ("ten", LIMIT_RULE),
    ("٣", LIMIT_RULE),  # a digit, but not an ASCII one
    ("99999999999", LIMIT_RULE),
])
def test_a_bad_limit_is_refused_inline_and_audited(operator, ledger, value, message):
    response = operator.post(limit_url(ledger), {"concurrency_limit": value}, **HTMX)
    assert response.status_code == 400
    assert message in text(response)
    assert f'value="{value}"' in text(response)  # the operator's input is kept for correcting
    assert Destination.objects.get(pk=ledger.pk).concurrency_limit == 8
    event = AuditEvent.objects.get(action="destination.update")
    assert (event.outcome, event.detail["input"]) == ("refused", value)


def test_a_viewer_cannot_edit_limits(workspace, ledger):
    viewer = client_for(workspace, Role.VIEWER, "view")
    assert viewer.get(reverse("ui:destination-edit", args=[ledger.pk]), **HTMX).status_code == 403
    response = viewer.post(limit_url(ledger), {"concurrency_limit": "1"}, **HTMX)
    assert response.status_code == 403
    assert Destination.objects.get(pk=ledger.pk).concurrency_limit == 8
    assert AuditEvent.objects.get(action="destination.update").outcome == "refused"
    assert "Edit" not in text(viewer.get("/rate-limits/")).split("<tbody")[1].split("</tbody>")[0]


def test_unknown_or_foreign_destinations_are_not_found(operator, other_workspace):
    foreign = Destination.objects.create(workspace=other_workspace, name="theirs", base_url="http://127.0.0.1:9")
    assert operator.post(limit_url(foreign), {"concurrency_limit": "1"}, **HTMX).status_code == 404
    assert operator.get(reverse("ui:destination-row", args=[999_999]), **HTMX).status_code == 404
    assert Destination.objects.get(pk=foreign.pk).concurrency_limit is None


def test_an_operator_creates_a_destination(operator, workspace):
    response = operator.post("/rate-limits/new", {"name": "billing-api", "base_url": "https://billing.example",
                                                  "timeout_seconds": "5", "concurrency_limit": "4"}, **HTMX)
    assert response.status_code == 200
    created = Destination.objects.get(workspace=workspace, name="billing-api")
    assert (created.base_url, created.timeout_seconds, created.concurrency_limit) == ("https://billing.example", 5, 4)
    assert 'id="destinations" hx-swap-oob="true"' in text(response)  # the table, with the new row
    event = AuditEvent.objects.get(action="destination.create")
    assert (event.actor, event.outcome, event.target) == ("user:op", "accepted", "destination:billing-api")


@pytest.mark.parametrize(("fields", "message", "status"), [
    ({"name": "", "base_url": "https://x.example"}, "name: required", 400),
    ({"name": "bad name!", "base_url": "https://x.example"}, "1-100 letters, digits", 400),
    ({"name": "x", "base_url": "ftp://x.example"}, "must be an http(s) URL", 400),
    ({"name": "x", "base_url": "https://x.example", "timeout_seconds": "soon"},
     "timeout_seconds: must be a number of seconds", 400),
    ({"name": "x", "base_url": "https://x.example", "timeout_seconds": "0"}, "timeout_seconds: must be a number", 400),
    ({"name": "demo-ledger", "base_url": "https://x.example"}, "a destination named 'demo-ledger' already exists",
     409),
])
def test_creating_a_bad_destination_says_why(operator, ledger, fields, message, status):
    response = operator.post("/rate-limits/new", {"timeout_seconds": "10", **fields}, **HTMX)
    assert response.status_code == status
    assert message in text(response)
    assert Destination.objects.count() == 1


def test_the_demo_ledger_switch_is_flipped_and_audited(operator, ledger):
    assert not demo_ledger.healthy()
    response = operator.post(reverse("demo:ledger-health"), {"on": "1"}, **HTMX)
    assert response.status_code == 200
    assert demo_ledger.healthy()
    assert 'data-healthy="yes"' in text(response)
    assert operator.post(reverse("demo:ledger-health"), {"on": "maybe"}, **HTMX).status_code == 400
    assert demo_ledger.healthy()
    outcomes = list(AuditEvent.objects.filter(action="demo.switch").order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["accepted", "refused"]



def test_the_page_shows_the_payload_store_against_capacity_and_high_water_mark(operator, workspace, settings):
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.start(workspace, "noop", {"blob": "x" * 50_000})
    settings.SB = {**settings.SB, "PAYLOAD_CAPACITY_BYTES": 100 * 1024 * 1024, "PAYLOAD_HIGH_WATER": 0.8}
    page = text(operator.get("/rate-limits/"))
    assert "<h2>Storage</h2>" in page and "<span data-capacity>100.0 MB</span>" in page
    assert "high-water mark <span data-high-water>80%</span>" in page and "(80.0 MB)" in page
    assert re.search(r"<strong data-used>[0-9.]+ KB</strong>", page) and "Below the high-water mark" in page

    settings.SB = {**settings.SB, "PAYLOAD_CAPACITY_BYTES": 50_000}
    page = text(operator.get("/rate-limits/"))
    assert "Above the high-water mark: new fan-outs wait" in page


def test_the_charts_show_each_called_destinations_last_fifteen_minutes(operator, ledger, workspace):
    from datetime import timedelta

    from django.db import connection

    from executions.models import DestinationCall
    from executions.selectors import destinations as destination_reads

    idle = Destination.objects.create(workspace=workspace, name="idle-api", base_url="http://127.0.0.1:9")
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")  # the buckets count back from database time
        now = cursor.fetchone()[0]
    # Newest bucket: 4 calls of 15 s each (2 in flight on average over 30 s), one 429 and one 500;
    # 10 minutes ago: one call; 20 minutes ago (outside the window): one more.
    rows = [(429, False, 15_000, 5), (500, False, 15_000, 6), (200, True, 15_000, 7), (200, True, 15_000, 8),
            (200, True, 100, 615), (200, True, 100, 1200)]
    for status, ok, latency_ms, ago in rows:
        DestinationCall.objects.create(destination=ledger, status_code=status, ok=ok, latency_ms=latency_ms,
                                       created_at=now - timedelta(seconds=ago))
    history = destination_reads.history([ledger.pk, idle.pk], minutes=15, bucket_seconds=30)
    buckets = history[ledger.pk]
    assert len(buckets) == 30 and [b.ago for b in buckets] == list(range(29, -1, -1))  # oldest first
    newest = buckets[-1]
    assert (newest.calls, newest.errors, newest.throttled) == (4, 2, 1)
    assert newest.mean_in_flight == pytest.approx(2.0)
    assert buckets[-21].calls == 1 and sum(b.calls for b in buckets) == 5
    assert not any(b.calls for b in history[idle.pk])

    page = text(operator.get("/rate-limits/"))
    charts = text(operator.get("/rate-limits/charts", **HTMX))
    for html in (page, charts):
        start = html.index('id="flow-charts"')
        section = html[start:html.index("</section>", start)]
        assert 'data-destination="demo-ledger"' in section and "<svg" in section
        assert "5 calls · 2 failed · 1 throttled" in section
        assert 'data-destination="idle-api"' not in section  # not called: no chart
        assert 'aria-label="Calls to demo-ledger in the last minutes"' in section
        assert "<script" not in section  # pygal is told to add no script


def test_with_no_call_in_the_window_the_charts_say_so(operator, ledger):
    charts = text(operator.get("/rate-limits/charts", **HTMX))
    assert "No destination was called in the last 15 minutes." in charts and "<svg" not in charts
