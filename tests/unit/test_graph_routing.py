"""The graph's geometry (executions/ui/graph_layout.py): edges routed around vertices, labels
beside their edges and off every vertex, a SPAWNER linked to its child workflow (issue 33 §2)."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest

from demo import workflows as demo_workflows
from executions.ui import graph, graph_layout
from workflows import dsl

SVG = "{http://www.w3.org/2000/svg}"

# The CHOICE's default edge skips the layer where the SPAWNER and MERGE stand (it was drawn
# as one curve straight through the MERGE, its label hidden behind it).
SKIPPING = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [
        {"when": {"path": "$.input.big", "equals": True}, "next": "fan"},
        {"when": {"path": "$.input.small", "equals": True}, "next": "one"}], "default": "done"},
    "one": {"type": "TASK", "handler": "demo.noop", "next": "done"},
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done"},
    "done": {"type": "SUCCEED"},
}}

WIDE = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [
        {"when": {"path": "$.input.k", "equals": n}, "next": f"t{n}"} for n in range(4)], "default": "end"},
    **{f"t{n}": {"type": "TASK", "handler": "demo.noop", "next": f"u{n}"} for n in range(4)},
    **{f"u{n}": {"type": "TASK", "handler": "demo.noop", "next": "end"} for n in range(4)},
    "end": {"type": "SUCCEED"},
}}


def segments(route: graph_layout.Route):
    return list(itertools.pairwise(route.points))


@pytest.mark.parametrize("document", [SKIPPING, WIDE, demo_workflows.HELLO, demo_workflows.LEDGER_MIGRATION],
                         ids=["skipping", "wide", "demo hello", "demo ledger"])
def test_no_edge_passes_through_a_vertex_it_does_not_join(document) -> None:
    placed = graph_layout.layout(dsl.parse(document))
    for route in placed.routes:
        source = placed.boxes[route.edge.source]
        assert route.points[0][1] == pytest.approx(source.y + source.h)
        assert route.points[-1][1] == pytest.approx(placed.boxes[route.edge.target].y)
        for a, b in segments(route):
            assert a[0] == b[0] or a[1] == b[1], "routes are orthogonal"
            for vid, box in placed.boxes.items():
                if vid not in (route.edge.source, route.edge.target):
                    assert not box.crossed_by(a, b), f"{route.edge} crosses {vid} at {a}–{b}"
            for vid in (route.edge.source, route.edge.target):  # nor its own ends' insides
                assert not placed.boxes[vid].crossed_by(a, b), f"{route.edge} runs inside {vid}"


def test_the_demo_hello_default_edge_no_longer_runs_behind_the_timer() -> None:
    placed = graph_layout.layout(dsl.parse(demo_workflows.HELLO))
    default = next(r for r in placed.routes if r.edge.label == "default")
    assert (default.edge.source, default.edge.target) == ("check", "done")
    assert not any(placed.boxes["pause"].crossed_by(a, b) for a, b in segments(default))
    assert not default.label_box.overlaps(placed.boxes["pause"])


def test_the_default_edge_goes_around_the_layer_it_skips() -> None:
    placed = graph_layout.layout(dsl.parse(SKIPPING))
    default = next(r for r in placed.routes if r.edge.label == "default")
    assert (default.edge.source, default.edge.target) == ("route", "done")
    join = placed.boxes["join"]
    # The channel runs beside the middle layer, outside every box of it.
    verticals = [a[0] for a, b in segments(default) if a[0] == b[0] and min(a[1], b[1]) < join.y < max(a[1], b[1])]
    assert verticals and all(not (box.x <= x <= box.x + box.w) for x in verticals
                             for box in (placed.boxes["one"], placed.boxes["fan"], join))


@pytest.mark.parametrize("document", [SKIPPING, WIDE, demo_workflows.HELLO, demo_workflows.LEDGER_MIGRATION],
                         ids=["skipping", "wide", "demo hello", "demo ledger"])
def test_labels_stay_off_vertices_and_each_other(document) -> None:
    placed = graph_layout.layout(dsl.parse(document))
    labels = [r.label_box for r in placed.routes if r.label_box is not None]
    assert len(labels) == sum(1 for r in placed.routes if r.edge.label)
    for label in labels:
        assert label.x >= 0 and label.x + label.w <= placed.width
        for vid, box in placed.boxes.items():
            assert not label.overlaps(box), f"a label overlaps {vid}"
    for a, b in itertools.combinations(labels, 2):
        assert not a.overlaps(b)


def test_edges_crossing_one_gap_run_sideways_on_lanes_of_their_own() -> None:
    placed = graph_layout.layout(dsl.parse(WIDE))
    runs = [(a[1], min(a[0], b[0]), max(a[0], b[0])) for r in placed.routes for a, b in segments(r) if a[1] == b[1]]
    for (y1, lo1, hi1), (y2, lo2, hi2) in itertools.combinations(runs, 2):
        if y1 == y2:
            assert min(hi1, hi2) <= max(lo1, lo2), "two sideways runs on one lane overlap"


def test_the_rendered_svg_draws_the_routes_and_links_the_spawner_to_its_child_workflow() -> None:
    parsed = dsl.parse(SKIPPING)
    root = ET.fromstring(graph.svg(parsed, workflow_url=lambda key: f"/workflows/{key}/"))  # noqa: S314 - our own SVG
    placed = graph_layout.layout(parsed)
    default = next(g for g in root.iter(f"{SVG}g") if g.get("data-label") == "default")
    path = default.find(f"{SVG}path").get("d")
    route = next(r for r in placed.routes if r.edge.label == "default")
    assert path == " ".join(f"{'M' if i == 0 else 'L'} {x:g} {y:g}" for i, (x, y) in enumerate(route.points))
    label = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "edge-label" and t.text == "default")
    assert (float(label.get("x")), float(label.get("y"))) == route.label_at
    # Labels are drawn after every vertex: nothing is painted over them.
    order = [el.get("class", "") for el in root]
    assert max(i for i, c in enumerate(order) if c.startswith("vertex")) < min(
        i for i, c in enumerate(order) if c == "edge-label")
    fan = next(g for g in root.iter(f"{SVG}g") if g.get("data-vertex") == "fan")
    assert fan.find(f"{SVG}a").get("href") == "/workflows/child/"


def test_an_overlay_colours_vertices_by_status_and_counts_the_fan_out() -> None:
    overlay = graph.Overlay(statuses={"route": "SUCCEEDED", "fan": "SUCCEEDED", "join": "WAITING"},
                            counts={"fan": {"succeeded": 90, "failed": 10, "running": 3, "pending": 0}})
    root = ET.fromstring(graph.svg(dsl.parse(SKIPPING), overlay, workflow_url=str))  # noqa: S314 - our own SVG
    vertices = {g.get("data-vertex"): g for g in root.iter(f"{SVG}g") if g.get("data-vertex")}
    assert vertices["join"].get("data-status") == "WAITING" and "status-waiting" in vertices["join"].get("class")
    assert vertices["one"].get("data-status") == "NOT_REACHED" and "not-reached" in vertices["one"].get("class")
    counts = next(t for t in vertices["fan"].iter(f"{SVG}text") if t.get("class") == "counts")
    assert (counts.get("data-succeeded"), counts.get("data-failed"), counts.get("data-running")) == ("90", "10", "3")
    assert counts.text == "90 ok · 10 failed · 3 running"  # zero pending left out
