"""The Rate Limits page's flow control in a real browser (issue 29 §4, issue 33 §2): an operator
sees each destination's mode, limit in effect, cooldown and breaker; edits the flow settings
(a bad value is refused in the form, nothing written; the good ones land in the database and
the API, audited); and reads the chart's limit as it was and the sparklines of in flight,
waiting, errors and p95 latency — checked against the database's own counts. And the charts
follow the page's changes at once (sb-changed), not only at their 15 s poll."""

import re
import statistics

import pytest
from django.db import connection
from playwright.sync_api import expect

from executions.destinations import rules
from executions.models import Destination, DestinationCall, DestinationLimit, DestinationSample, Execution
from executions.ui import rate_limits
from tests.support import ARTIFACTS, factories, helpers
from tests.support.clients import api
from tests.support.cluster import wait_for
from workflows.models import AuditEvent

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(240)]

CALL = {"start": "call", "vertices": {
    "call": {"type": "HTTP", "destination": "slow-api", "method": "POST", "path": "/hold", "body": "$.input",
             "timeoutSeconds": 120, "next": "done"},
    "done": {"type": "SUCCEED"},
}}
DOWN = {"start": "call", "vertices": {
    "call": {"type": "HTTP", "destination": "down-api", "method": "POST", "path": "/x", "body": "$.input",
             "retry": {"maxAttempts": 1}, "next": "done"},
    "done": {"type": "SUCCEED"},
}}
ITEMS = 8
SCREENSHOTS = ARTIFACTS / "screenshots"  # rate-limits.png: the picture in docs/ui.md


def cell(page, destination, column):
    return page.locator(f"#destination-{destination.pk}-{column}")


def series(page, name, key):
    text = page.locator(f"figure[data-destination='{name}'] .sparkline[data-series='{key}']").get_attribute(
        "data-values")
    return [None if v == "" else float(v) for v in text.split(",")]


def p95_of(destination):
    with connection.cursor() as cursor:
        cursor.execute("SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) "
                       "FROM executions_destinationcall WHERE destination_id = %s", [destination.pk])
        return cursor.fetchone()[0]


def test_operator_edits_flow_control_and_reads_the_flow_history(page, ui, operator, qcluster, gate, monkeypatch):
    # Only the page's own changes may refresh the charts here: their poll is far away.
    monkeypatch.setattr(rate_limits, "CHART_POLL_SECONDS", 600)
    workspace = factories.default_workspace()
    slow = rules.create_destination(workspace, name="slow-api", base_url=gate.url, timeout_seconds=100,
                                    concurrency_limit=3)
    down = rules.create_destination(workspace, name="down-api", base_url="http://127.0.0.1:9")
    helpers.publish(workspace, "call-slow", CALL)
    helpers.publish(workspace, "fan-slow", helpers.fanout_doc("call-slow"))
    helpers.publish(workspace, "call-down", DOWN)
    ui.log_in(operator, next_path="/rate-limits/")
    ui.mark_page()
    charts = page.locator("#flow-charts")
    expect(charts).to_contain_text("No destination was called in the last 15 minutes.")
    row = page.locator("#destinations tr[data-name='slow-api']")
    expect(cell(page, slow, "flow")).to_contain_text("limit now 3")
    expect(cell(page, slow, "flow")).to_contain_text("breaker off")
    expect(row.locator(".flow-settings")).to_contain_text("fixed")

    execution = helpers.start(workspace, "fan-slow", {"items": [{"i": i} for i in range(ITEMS)]})
    failing = [helpers.start(workspace, "call-down", {}) for _ in range(2)]
    qcluster(workers=2)
    expect(cell(page, slow, "in-flight")).to_have_text("3", timeout=60_000)
    expect(cell(page, slow, "waiting")).to_have_text(str(ITEMS - 3), timeout=30_000)
    wait_for(lambda: all(Execution.objects.get(pk=e.pk).status == "FAILED" for e in failing), timeout=60,
             what="the calls to the destination that is down")
    # The drains sample every few seconds: wait until one saw the saturated destination.
    wait_for(lambda: DestinationSample.objects.filter(destination=slow, in_flight=3, waiting=ITEMS - 3).exists(),
             timeout=30,
             what="a sample of the waiting steps")

    # The defect (sb-changed): calls to down-api ended, yet the charts say nobody was called
    # until an edit announces the change.
    expect(charts).to_contain_text("No destination was called")
    row.get_by_role("button", name="Edit the flow control of slow-api").click()
    form = row.locator("form.flow-form")
    form.get_by_label("Concurrency mode of slow-api").select_option("adaptive")
    form.get_by_label("Floor (concurrency_min) of slow-api").fill("0")
    form.get_by_label("Longest cooldown (max_cooldown_seconds) of slow-api").fill("60")
    form.get_by_label("Throttled waits (max_throttled_waits) of slow-api").fill("7")
    form.get_by_label("Circuit breaker of slow-api on").check()
    form.get_by_label("Breaker failure ratio of slow-api").fill("0.4")
    form.get_by_label("Breaker min calls of slow-api").fill("10")
    form.get_by_role("button", name="Save flow control").click()
    expect(row.locator(".field-error")).to_contain_text("concurrency_min: must be a whole number from 1 to")
    expect(row.get_by_label("Floor (concurrency_min) of slow-api")).to_have_attribute("aria-invalid", "true")
    unchanged = Destination.objects.get(pk=slow.pk)
    assert (unchanged.concurrency_mode, unchanged.concurrency_min, unchanged.breaker) == ("fixed", 1, None)
    ui.screenshot("rate-limits-flow-1-refused")

    row.get_by_label("Floor (concurrency_min) of slow-api").fill("2")
    row.get_by_role("button", name="Save flow control").click()
    expect(row.locator(".saved")).to_contain_text("Flow control of 'slow-api' saved")
    expect(cell(page, slow, "flow")).to_contain_text("limit now 2")
    expect(cell(page, slow, "flow")).to_contain_text("adaptive 2–3")
    expect(cell(page, slow, "flow")).to_contain_text("breaker closed")
    expect(row.locator(".breaker-config")).to_contain_text("0.4 of ≥ 10 calls")
    # The edit announced itself: the charts show down-api's failed calls at once.
    expect(charts.locator("figure[data-destination='down-api']")).to_be_visible(timeout=5_000)

    saved = Destination.objects.get(pk=slow.pk)
    assert (saved.concurrency_mode, saved.concurrency_min, saved.max_cooldown_seconds, saved.max_throttled_waits) == (
        "adaptive", 2, 60.0, 7)
    assert saved.breaker == {"failure_ratio": 0.4, "min_calls": 10, "window_seconds": 30.0, "open_seconds": 30.0}
    shown = api(workspace, "viewer").get("/api/v1/destinations/slow-api").json()
    assert (shown["concurrency_mode"], shown["concurrency_min"], shown["concurrency_current"],
            shown["max_throttled_waits"], shown["breaker_state"]) == ("adaptive", 2, 2, 7, "closed")
    assert shown["breaker"]["failure_ratio"] == 0.4
    audit = list(AuditEvent.objects.filter(action="destination.update").order_by("id"))
    assert [(a.outcome, a.actor) for a in audit] == [("refused", "user:oper"), ("accepted", "user:oper")]
    assert audit[1].detail["fields"] == ["breaker", "concurrency_min", "concurrency_mode", "max_cooldown_seconds",
                                         "max_throttled_waits"]

    gate.open()
    wait_for(lambda: Execution.objects.get(pk=execution.pk).status == "SUCCEEDED", timeout=90, what="the fan-out")
    expect(cell(page, slow, "waiting")).to_have_text("0", timeout=30_000)
    # An edit of the limit refreshes the charts too: slow-api's calls appear.
    row.get_by_role("button", name=re.compile("Edit the limit")).click()
    row.get_by_label("Concurrency limit of slow-api").fill("5")
    row.get_by_role("button", name="Save").click()
    expect(row.locator(".limit-value")).to_have_text("5")
    figure = charts.locator("figure[data-destination='slow-api']")
    expect(figure).to_be_visible(timeout=5_000)
    expect(figure).to_contain_text(f"{ITEMS} calls")

    # The chart's limit as it was: 3 (fixed), then adaptive from its floor; the history rows
    # the database wrote for each change.
    limits = list(DestinationLimit.objects.filter(destination=slow).order_by("id").values_list("limit", flat=True))
    assert limits[:2] == [3, 2]
    # The sparklines against the database's counts.
    waiting = series(page, "slow-api", "waiting")
    # At least the saturated sample waited for above (3 in flight, the rest waiting); a sample
    # taken after the spawn and before the first claims saw every item waiting.
    assert ITEMS - 3 <= max(v for v in waiting if v is not None) <= ITEMS
    assert max(waiting) == max(DestinationSample.objects.filter(destination=slow).values_list("waiting", flat=True))
    in_flight = series(page, "slow-api", "in-flight")
    assert max(in_flight) == 3  # the limit held: as many slots in use, never more
    assert max(in_flight) == max(DestinationSample.objects.filter(destination=slow).values_list("in_flight",
                                                                                                 flat=True))
    calls = list(DestinationCall.objects.filter(destination=slow).values_list("latency_ms", flat=True))
    p95 = [v for v in series(page, "slow-api", "p95") if v is not None]
    assert p95 and min(calls) - 0.05 <= min(p95) and max(p95) <= max(calls) + 0.05  # shown to 0.1 ms
    if len(p95) == 1:  # every call ended in one bucket: the database's own p95 of them
        assert p95[0] == pytest.approx(p95_of(slow), abs=0.05)
    errors = series(page, "down-api", "errors")
    assert sum(errors) == DestinationCall.objects.filter(destination=down, ok=False).count() == 2
    assert statistics.fmean(v for v in series(page, "slow-api", "errors") if v is not None) == 0
    ui.screenshot("rate-limits-flow-2-charts")
    table, panel = page.locator("#destinations").bounding_box(), charts.bounding_box()
    assert table and panel
    page.screenshot(path=str(SCREENSHOTS / "rate-limits.png"), full_page=True, clip={
        "x": 0, "y": table["y"] - 16, "width": 1360, "height": panel["y"] + panel["height"] - table["y"] + 32})
    assert ui.still_same_page()
