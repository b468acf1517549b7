"""The execution view's pictures against the database (issue 33 §2): the run graph's statuses
and fan-out counts are the steps' and the FanOut counters', the timeline has a bar per
recorded attempt, the throughput chart's buckets add up to the finished children — each a
live fragment with a constant number of queries."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench import ui as bench_ui
from executions.core import state
from executions.models import Execution, FanOut, Step
from executions.selectors import throughput
from tests.support import helpers

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
FAILING = {1, 4, 9}
TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}


@pytest.fixture
def fanout(workspace) -> Execution:
    execution = helpers.run_fanout(workspace, 12, failing=FAILING, merge_config=TOLERANT)
    assert execution.status == "SUCCEEDED"
    return execution


def fragment(client, url: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, HTTP_HX_REQUEST="true")
    assert response.status_code in (200, 286), response.content[:500]
    return response.content.decode(), len(queries)


def svg_of(html: str, css: str) -> ET.Element:
    match = re.search(rf'<svg class="{css}".*?</svg>', html, re.S)
    assert match, f"no svg.{css}"
    return ET.fromstring(match.group(0))  # noqa: S314 - the server's own SVG


def test_the_run_graph_colours_each_vertex_by_its_step_and_counts_the_fan_out(operator, fanout):
    html, queries = fragment(operator, reverse("ui:execution-run", args=[fanout.pk]))
    graph = svg_of(html, "workflow-graph run-graph")
    vertices = {g.get("data-vertex"): g for g in graph.iter(f"{SVG}g") if g.get("data-vertex")}
    steps = {s.vertex: s.status for s in Step.objects.filter(execution=fanout)}
    assert {v: g.get("data-status") for v, g in vertices.items()} == steps == {
        "fan": "SUCCEEDED", "join": "SUCCEEDED", "done": "SUCCEEDED"}
    counters = FanOut.objects.get(execution=fanout)
    for vertex in ("fan", "join"):
        counts = next(t for t in vertices[vertex].iter(f"{SVG}text") if t.get("class") == "counts")
        assert (int(counts.get("data-succeeded")), int(counts.get("data-failed")), int(counts.get("data-running"))) \
            == (counters.succeeded, counters.failed, 0) == (9, 3, 0)
    # The SPAWNER links to the child workflow version its children ran.
    link = vertices["fan"].find(f"{SVG}a").get("href")
    version = counters.target_version
    assert link == reverse("ui:version-detail", args=[version.definition.key, version.hash])
    assert queries <= 12


@pytest.mark.django_db(transaction=True)  # each transition its own transaction: its own now()
def test_the_timeline_has_a_bar_per_attempt_and_the_backoff_between(operator, workspace):
    helpers.publish(workspace, "one", {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.noop",
                                                                         "retry": {"maxAttempts": 3}}}})
    execution = helpers.start(workspace, "one", {})
    step = Step.objects.get(execution=execution, vertex="t")
    with connection.cursor() as cursor:
        state.run_executions(cursor, [execution.pk], started=[None])
        state.claim_steps(cursor, [step.pk], lease_seconds=60, worker="test")
        state.retry_steps_later(cursor, [step.pk], errors=["HTTP 503"], delays=[0.0], messages=["HTTP 503; retry"])
        state.claim_steps(cursor, [step.pk], lease_seconds=60, worker="test")
    html, queries = fragment(operator, reverse("ui:execution-run", args=[execution.pk]))
    chart = svg_of(html, "timeline-chart")
    lane = next(g for g in chart.iter(f"{SVG}g") if g.get("data-vertex") == "t")
    bars = [(r.get("data-kind"), r.get("data-attempt")) for r in lane.iter(f"{SVG}rect") if r.get("data-kind")]
    kinds = [kind for kind, _ in bars]
    assert [a for kind, a in bars if kind == "running"] == ["1", "2"]
    assert kinds[-1] == "running" and "backoff" in kinds  # its second attempt runs now
    assert queries <= 12


def test_the_throughput_chart_adds_up_to_the_finished_children(operator, fanout):
    url = reverse("ui:execution-throughput", args=[fanout.pk, "fan"])
    _, first = fragment(operator, url)
    html, queries = fragment(operator, url)  # a poll: the settled buckets' cache is read, not written
    counters = FanOut.objects.get(execution=fanout)
    finished = re.search(r'data-finished="(\d+)" data-succeeded="(\d+)" data-failed="(\d+)"', html)
    assert finished and tuple(map(int, finished.groups())) == (
        counters.succeeded + counters.failed + counters.cancelled, counters.succeeded, counters.failed)
    # The bars themselves.
    chart = svg_of(html, "throughput-chart")
    bars = [g for g in chart.iter(f"{SVG}g") if g.get("class") == "bucket"]
    assert sum(int(g.get("data-succeeded")) for g in bars) == counters.succeeded
    assert sum(int(g.get("data-failed")) for g in bars) == counters.failed
    assert sum(len(g.findall(f"{SVG}rect")) for g in bars) >= 2  # a green and a red bar at least
    data = throughput.of_fanout(fanout.pk, "fan", running=False)
    assert data.finished == 12 and data.span >= 0 and len(data.buckets) <= throughput.MAX_BUCKETS
    # The session's 4, the execution, the fan-out's 2, the cache, the chart's 2 (the first view
    # writes the cache too).
    assert queries <= 10 and first <= 15


def test_the_throughput_query_reads_only_the_index(workspace, fanout):
    """The query can be answered by an index-only scan of ``execution_child_finished`` (with
    a dozen rows the planner may prefer any index, so only index-only scans are allowed
    here; with 20,000 children and fresh statistics the planner picks it unprompted)."""
    with connection.cursor() as cursor:
        for method in ("seqscan", "indexscan", "bitmapscan"):
            cursor.execute(f"SET LOCAL enable_{method} = off")
        cursor.execute("EXPLAIN " + throughput.BUCKETS, {"parent": fanout.pk, "spawner": "fan",
                                                         "origin": fanout.created_at, "width": 1,
                                                         "since": fanout.created_at})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using execution_child_finished" in plan and "Disabled" not in plan, plan


def test_the_pictures_load_on_the_execution_page_and_stop_polling_once_it_ended(operator, fanout):
    page = operator.get(reverse("ui:execution-detail", args=[fanout.pk])).content.decode()
    assert reverse("ui:execution-run", args=[fanout.pk]) in page
    assert reverse("ui:execution-throughput", args=[fanout.pk, "fan"]) in page
    response = operator.get(reverse("ui:execution-run", args=[fanout.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 286  # ended: htmx stops polling
    response = operator.get(reverse("ui:execution-throughput", args=[fanout.pk, "nope"]), HTTP_HX_REQUEST="true")
    assert response.status_code == 404


def test_settled_buckets_come_from_the_cache_and_a_retry_makes_the_chart_read_everything_again(workspace):
    scene = bench_ui.build(400)  # children finished an hour ago: their buckets have settled
    parent = scene["parent"]
    cache.delete(throughput.cache_key(parent, "fan"))
    counters = FanOut.objects.get(execution_id=parent)
    done = counters.succeeded + counters.failed + counters.cancelled
    first = throughput.of_fanout(parent, "fan", running=True, finished=done)
    assert first.finished == done and first.failed == counters.failed
    cached = cache.get(throughput.cache_key(parent, "fan"))
    assert cached["settled"] > 0 and sum(sum(c) for c in cached["frozen"].values()) == done
    with CaptureQueriesContext(connection) as queries:
        again = throughput.of_fanout(parent, "fan", running=True, finished=done)
    assert again.buckets == first.buckets
    read = next(q["sql"] for q in queries.captured_queries if "date_bin" in q["sql"])
    assert "finished_at >= '" in read and str(first.began_at)[:10] in read  # from the settled boundary on
    # A failed child retried and succeeded: its finish moved to now, the counters say so.
    child = Execution.objects.filter(parent_id=parent, status="FAILED").first()
    with connection.cursor() as cursor:
        state.retry_executions(cursor, [child.pk], message="test retry")
        state.run_executions(cursor, [child.pk], started=[None])
        state.succeed_executions(cursor, [child.pk], output_vertices=["t"], started=[None])
    assert FanOut.objects.get(execution_id=parent).failed == counters.failed - 1
    stale = throughput.of_fanout(parent, "fan", running=True, finished=done)
    assert stale.failed == counters.failed  # within RECOMPUTE_SECONDS of the last full read: the old counts
    entry = cache.get(throughput.cache_key(parent, "fan"))
    entry["full_at"] -= timedelta(seconds=throughput.RECOMPUTE_SECONDS + 1)
    cache.set(throughput.cache_key(parent, "fan"), entry)
    fresh = throughput.of_fanout(parent, "fan", running=True, finished=done)
    assert (fresh.failed, fresh.succeeded, fresh.finished) == (counters.failed - 1, counters.succeeded + 1, done)
