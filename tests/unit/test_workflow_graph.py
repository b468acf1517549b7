"""The version graph (executions/ui/graph.py): a layered SVG of the parsed DSL with every
vertex by kind, every edge (CHOICE branches labelled) and the SPAWNER→MERGE link."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from executions.ui import graph
from workflows import dsl

SVG = "{http://www.w3.org/2000/svg}"
DOC = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.big", "equals": True}, "next": "fan"}],
              "default": "one"},
    "one": {"type": "TASK", "handler": "demo.noop", "next": "done"},
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done"},
    "done": {"type": "SUCCEED"},
}}


def drawing(parsed: dsl.ast.Workflow) -> ET.Element:
    return ET.fromstring(graph.svg(parsed))  # noqa: S314 - the code under test's own SVG, not untrusted input


def test_every_vertex_is_drawn_with_its_kind_in_the_layer_of_its_longest_path() -> None:
    parsed = dsl.parse(DOC)
    assert graph.layers(parsed, graph.edges(parsed)) == {"route": 0, "one": 1, "fan": 1, "join": 2, "done": 3}
    root = drawing(parsed)
    kinds = {g.get("data-vertex"): g.get("data-kind") for g in root.iter(f"{SVG}g") if g.get("data-vertex")}
    assert kinds == {"route": "CHOICE", "one": "TASK", "fan": "SPAWNER", "join": "MERGE", "done": "SUCCEED"}


def test_edges_include_labelled_branches_and_the_spawner_merge_link() -> None:
    parsed = dsl.parse(DOC)
    assert {(e.source, e.target, e.label, e.kind) for e in graph.edges(parsed)} == {
        ("route", "fan", "1", "branch"), ("route", "one", "default", "branch"), ("one", "done", "", "next"),
        ("fan", "join", "", "next"), ("fan", "join", "merge", "merge"), ("join", "done", "", "next")}
    root = drawing(parsed)
    drawn = {(g.get("data-from"), g.get("data-to"), g.get("class")) for g in root.iter(f"{SVG}g") if g.get("data-from")}
    assert ("fan", "join", "edge edge-merge") in drawn and ("route", "one", "edge edge-branch") in drawn
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "edge-label"]
    assert sorted(labels) == ["1", "default", "merge"]
