"""Issue 33 §2: the execution view's pictures in a real browser, against the database — the
run graph coloured by the steps with the fan-out's counters on its SPAWNER and MERGE, the
timeline of steps and attempts, the throughput chart adding up to the finished children —
growing with the run on a page opened before it started; the graph's default edge and its
label clear of every vertex; the SPAWNER linking to its child workflow's version."""

import itertools
import re

import pytest
from playwright.sync_api import expect

from demo import workflows as demo_workflows
from executions.models import FanOut, Step
from tests.support import ARTIFACTS, factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(180)]

TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}
ROUTED = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.single", "equals": True}, "next": "one"}],
              "default": "fan"},
    "one": {"type": "TASK", "handler": "demo.noop", "next": "done"},
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done", "config": TOLERANT},
    "done": {"type": "SUCCEED"},
}}
FAILING = {2, 5, 11}


def box(locator):
    found = locator.bounding_box()
    assert found is not None
    return found


def overlaps(a, b) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def test_the_run_graph_timeline_and_throughput_follow_the_run(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "routed", ROUTED)
    items = [{"i": i, "fail": i in FAILING} for i in range(24)]
    parent = helpers.start(workspace, "routed", {"items": items})

    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    graph = page.locator("#execution-run svg.run-graph")
    expect(graph).to_be_visible()
    expect(graph.locator("[data-vertex='route']")).to_have_attribute("data-status", "READY")
    expect(graph.locator("[data-vertex='fan']")).to_have_attribute("data-status", "NOT_REACHED")
    ui.mark_page()

    helpers.run_engine()  # the CHOICE takes its default, the fan-out runs, the merge tolerates 3 failures
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=20_000)
    steps = {s.vertex: s for s in Step.objects.filter(execution=parent)}
    for vertex, status in {"route": "SUCCEEDED", "fan": "SUCCEEDED", "join": "SUCCEEDED", "done": "SUCCEEDED",
                           "one": "NOT_REACHED"}.items():
        expect(graph.locator(f"[data-vertex='{vertex}']")).to_have_attribute("data-status", status, timeout=20_000)
        assert vertex == "one" or steps[vertex].status == status
    counters = FanOut.objects.get(execution=parent)
    for vertex in ("fan", "join"):
        counts = graph.locator(f"[data-vertex='{vertex}'] text.counts")
        expect(counts).to_have_attribute("data-succeeded", str(counters.succeeded))
        expect(counts).to_have_attribute("data-failed", str(counters.failed))
        expect(counts).to_have_attribute("data-running", "0")
    assert (counters.succeeded, counters.failed) == (21, 3)

    # The default edge's label is on top and clear of every vertex; its path avoids them too
    # (the geometry's unit tests check each segment; here: the label as the browser laid it out).
    label = graph.locator("text.edge-label[data-from='route'][data-to='fan']")
    expect(label).to_have_text("default")
    label_box = box(label)
    for vertex in ("route", "one", "fan", "join", "done"):
        assert not overlaps(label_box, box(graph.locator(f"[data-vertex='{vertex}'] rect"))), vertex

    # The timeline: one lane per step, each ended, each attempt in running bars (a MERGE runs
    # twice in its one attempt: before and after it waits for the children).
    timeline = page.locator("#run-timeline svg.timeline-chart")
    expect(timeline.locator("g.lane")).to_have_count(len(steps))
    join = timeline.locator("g.lane[data-vertex='join']")
    expect(join.locator("rect[data-kind='waiting']")).to_have_count(1)  # for its children
    for vertex, step in steps.items():
        lane = timeline.locator(f"g.lane[data-vertex='{vertex}']")
        expect(lane).to_have_attribute("data-status", step.status)
        running = lane.locator("rect[data-kind='running']")
        attempts = {running.nth(i).get_attribute("data-attempt") for i in range(running.count())}
        assert attempts == {str(n) for n in range(1, step.attempt + 1)}, vertex
        expect(lane.locator(f"rect.end-{step.status.lower()}")).to_have_count(1)

    # The throughput chart adds up to the finished children (the counters).
    chart = page.locator("#throughput-fan")
    expect(chart).to_have_attribute("data-finished", str(counters.succeeded + counters.failed + counters.cancelled))
    bars = chart.locator("svg.throughput-chart g.bucket")
    assert sum(int(bars.nth(i).get_attribute("data-succeeded")) for i in range(bars.count())) == counters.succeeded
    assert sum(int(bars.nth(i).get_attribute("data-failed")) for i in range(bars.count())) == counters.failed
    assert ui.still_same_page()
    ui.screenshot("pictures-1-run-graph-timeline-throughput")
    page.locator("#execution-run").screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-2-run-panel.png"))
    chart.screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-3-throughput.png"))

    # The SPAWNER links to the child workflow version its children ran.
    origin = page.url.split("/executions/")[0]
    graph.locator("[data-vertex='fan'] a").click()
    expect(page).to_have_url(f"{origin}/workflows/child/versions/{counters.target_version.hash}/")


def test_the_workflow_page_draws_the_default_edge_around_the_timer(page, ui, operator):
    """The demo's hello workflow: its CHOICE's default edge skips the TIMER's layer; it was
    drawn straight behind the TIMER, its label hidden."""
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", demo_workflows.HELLO)
    ui.log_in(operator, next_path="/workflows/hello/")
    graph = page.locator("#current-graph svg.workflow-graph")
    label = graph.locator("text.edge-label[data-from='check'][data-to='done']")
    expect(label).to_have_text("default")
    expect(label).to_be_visible()
    for vertex in ("greet", "check", "pause", "done"):
        assert not overlaps(box(label), box(graph.locator(f"[data-vertex='{vertex}'] rect"))), vertex
    # The path's points (the geometry's unit tests hold every segment off the boxes): here its
    # vertical run beside the TIMER stays outside the TIMER's box as the browser drew it.
    pause = box(graph.locator("[data-vertex='pause'] rect"))
    path = graph.locator("g.edge[data-from='check'][data-to='done'] path")
    runs = path.evaluate("""p => { const m = p.getScreenCTM(); const d = p.getAttribute('d').split(/[ML]/).slice(1);
        return d.map(s => { const [x, y] = s.trim().split(' ').map(Number);
                            const q = new DOMPoint(x, y).matrixTransform(m); return [q.x, q.y]; }); }""")
    verticals = 0
    for (x1, y1), (x2, y2) in itertools.pairwise(runs):
        if abs(x1 - x2) < 0.5 and min(y1, y2) < pause["y"] + pause["height"] and max(y1, y2) > pause["y"]:
            verticals += 1
            assert not pause["x"] <= x1 <= pause["x"] + pause["width"]
    assert verticals == 1  # it runs down beside the TIMER, in its channel
    page.locator("#current-graph").screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-4-workflow-graph.png"))


SLOW_CHILD = {"start": "pause", "vertices": {
    "pause": {"type": "TIMER", "seconds": 1, "next": "t"},
    "t": {"type": "TASK", "handler": "demo.fail_if", "retry": {"maxAttempts": 1}},
}}
PACED = {"start": "fan", "vertices": {
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "slow", "next": "join", "maxConcurrency": 20},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done", "config": TOLERANT},
    "done": {"type": "SUCCEED"},
}}


def test_the_throughput_chart_shows_an_eta_while_children_run(page, ui, operator, qcluster):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "slow", SLOW_CHILD)
    helpers.publish(workspace, "paced", PACED)
    items = [{"i": i, "fail": i % 17 == 3} for i in range(120)]
    parent = helpers.start(workspace, "paced", {"items": items})
    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    qcluster(workers=2)
    eta = page.locator("#eta-fan")
    # Children finished, more to go: a rate and an ETA.
    expect(eta).to_contain_text(re.compile(r"ETA \d.* to go at the last minute's"), timeout=90_000)
    page.locator("#throughput-fan").screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-5-throughput-eta.png"))
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=120_000)
    counters = FanOut.objects.get(execution=parent)
    chart = page.locator("#throughput-fan")
    expect(chart).to_have_attribute("data-finished", str(counters.succeeded + counters.failed), timeout=20_000)
    expect(chart).to_have_attribute("data-failed", str(counters.failed))
    assert counters.failed == len([i for i in range(120) if i % 17 == 3])
    expect(page.locator("#eta-fan")).to_have_count(0)  # ended: no ETA
    graph = page.locator("#execution-run svg.run-graph")
    expect(graph.locator("[data-vertex='done']")).to_have_attribute("data-status", "SUCCEEDED", timeout=20_000)
    expect(graph.locator("[data-vertex='join'] text.counts")).to_have_attribute("data-succeeded",
                                                                                 str(counters.succeeded))
    page.locator("#execution-run").screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-6-run-panel-paced.png"))
    chart.screenshot(path=str(ARTIFACTS / "screenshots" / "pictures-7-throughput-done.png"))
