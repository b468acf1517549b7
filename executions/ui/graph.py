"""A workflow version's graph as an SVG picture, drawn on the server from the parsed DSL.

A small layered layout, no JavaScript: each vertex sits in the layer of its longest path
from the start (the DSL is acyclic), layers run top to bottom, vertices of a layer left to
right in document order. Edges are the ``next`` links, a CHOICE's branches (labelled with
the rule's number, or ``default``) and, dashed, each SPAWNER's link to its MERGE. Vertices
carry their kind as a class (``kind-task`` …), so app.css colours them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import escape

from workflows.dsl import ast

BOX_W, BOX_H = 168, 46
GAP_X, GAP_Y = 36, 58
MARGIN = 16
LABEL_CHARS = 22


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""
    kind: str = "next"  # next | branch | merge


def edges(workflow: ast.Workflow) -> list[Edge]:
    """Every link between vertices, in document order."""
    found: list[Edge] = []
    for vertex in workflow.vertices.values():
        if isinstance(vertex, ast.Choice):
            found += [Edge(vertex.id, rule.next, str(number), "branch")
                      for number, rule in enumerate(vertex.choices, start=1)]
            if vertex.default:
                found.append(Edge(vertex.id, vertex.default, "default", "branch"))
        else:
            found += [Edge(vertex.id, target) for target in vertex.successors()]
        if isinstance(vertex, ast.Merge) and vertex.spawner in workflow.vertices:
            found.append(Edge(vertex.spawner, vertex.id, "merge", "merge"))
    return [edge for edge in found if edge.target in workflow.vertices]


def layers(workflow: ast.Workflow, links: list[Edge]) -> dict[str, int]:
    """Each vertex's layer: the length of its longest path from the start (unreachable
    vertices — the validator refuses them — go below the rest)."""
    depth = {workflow.start: 0}
    changed = True
    rounds = 0
    while changed and rounds <= len(workflow.vertices):  # longest paths in a DAG settle in |V| rounds
        changed, rounds = False, rounds + 1
        for edge in links:
            if edge.source in depth and depth.get(edge.target, -1) < depth[edge.source] + 1:
                depth[edge.target] = depth[edge.source] + 1
                changed = True
    bottom = max(depth.values()) + 1
    return {vid: depth.get(vid, bottom) for vid in workflow.vertices}


def svg(workflow: ast.Workflow) -> str:
    """The picture, as an inline ``<svg>`` element."""
    links = edges(workflow)
    layer_of = layers(workflow, links)
    rows: dict[int, list[str]] = {}
    for vid in workflow.vertices:
        rows.setdefault(layer_of[vid], []).append(vid)
    widest = max(len(row) for row in rows.values())
    width = 2 * MARGIN + widest * BOX_W + (widest - 1) * GAP_X
    height = 2 * MARGIN + len(rows) * BOX_H + (len(rows) - 1) * GAP_Y
    place: dict[str, tuple[float, float]] = {}
    for number, layer in enumerate(sorted(rows)):
        row = rows[layer]
        offset = (width - (len(row) * BOX_W + (len(row) - 1) * GAP_X)) / 2
        for position, vid in enumerate(row):
            place[vid] = (offset + position * (BOX_W + GAP_X), MARGIN + number * (BOX_H + GAP_Y))
    parts = [f'<svg class="workflow-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" '
             f'width="{width:g}" height="{height:g}" role="img" aria-label="Workflow graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']
    parts += [_edge(edge, place) for edge in links]
    parts += [_vertex(workflow.vertices[vid], place[vid], vid == workflow.start) for vid in workflow.vertices]
    parts.append("</svg>")
    return "\n".join(parts)


def _edge(edge: Edge, place: dict[str, tuple[float, float]]) -> str:
    (sx, sy), (tx, ty) = place[edge.source], place[edge.target]
    x1, y1 = sx + BOX_W / 2, sy + BOX_H
    x2, y2 = tx + BOX_W / 2, ty
    if ty <= sy:  # drawn upwards or sideways (only an unreachable vertex can be): leave from the side
        x1, y1 = sx + BOX_W, sy + BOX_H / 2
    mid_y = (y1 + y2) / 2
    path = f"M {x1:g} {y1:g} C {x1:g} {mid_y:g}, {x2:g} {mid_y:g}, {x2:g} {y2:g}"
    label = ""
    if edge.label:
        lx, ly = (x1 + x2) / 2, mid_y
        label = f'<text class="edge-label" x="{lx:g}" y="{ly:g}">{escape(edge.label)}</text>'
    return (f'<g class="edge edge-{edge.kind}" data-from="{escape(edge.source)}" data-to="{escape(edge.target)}">'
            f'<path d="{path}" marker-end="url(#arrow)"/>{label}</g>')


def _vertex(vertex: ast.Vertex, at: tuple[float, float], start: bool) -> str:
    x, y = at
    name = vertex.id if len(vertex.id) <= LABEL_CHARS else vertex.id[: LABEL_CHARS - 1] + "…"
    classes = f"vertex kind-{vertex.type.lower()}" + (" start" if start else "")
    return (f'<g class="{classes}" data-vertex="{escape(vertex.id)}" data-kind="{vertex.type}">'
            f"<title>{escape(vertex.id)} ({vertex.type}){_detail(vertex)}</title>"
            f'<rect x="{x:g}" y="{y:g}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
            f'<text class="name" x="{x + BOX_W / 2:g}" y="{y + 20:g}">{escape(name)}</text>'
            f'<text class="kind" x="{x + BOX_W / 2:g}" y="{y + 36:g}">{vertex.type}</text></g>')


def _detail(vertex: ast.Vertex) -> str:
    if isinstance(vertex, ast.Task):
        return escape(f": {vertex.handler}")
    if isinstance(vertex, ast.Http):
        return escape(f": {vertex.method} {vertex.destination}{vertex.path}")
    if isinstance(vertex, ast.Spawner):
        return escape(f": each of {vertex.items} → {vertex.workflow or vertex.version}")
    if isinstance(vertex, ast.Chain):
        return escape(f": → {vertex.workflow}")
    return ""
