"""A workflow version's graph as an SVG picture, drawn on the server from the parsed DSL.

No JavaScript. The geometry — layers top to bottom, edges routed through the gaps between
layers and around vertices, labels beside their edges — is graph_layout.py's. Edges are the
``next`` links, a CHOICE's branches (labelled with the rule's number, or ``default``) and,
dashed, each SPAWNER's link to its MERGE. Vertices carry their kind as a class
(``kind-task`` …), so app.css colours them; a SPAWNER links to its child workflow's page.

The run graph (run_graph.py) is the same picture with an ``Overlay``: each vertex's status in
one execution (class ``status-…``) and a line of counts under SPAWNER and MERGE vertices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.urls import reverse
from django.utils.html import escape

from executions.ui.graph_layout import BOX_H, Box, Edge, Route, edges, layers, layout
from workflows.dsl import ast

__all__ = ["Edge", "Overlay", "edges", "layers", "svg"]

LABEL_CHARS = 22
RUN_BOX_H = 60  # room for a third line: the counts of a fan-out


@dataclass
class Overlay:
    """One execution's view of the graph."""

    statuses: dict[str, str] = field(default_factory=dict)  # vertex → status shown (no step yet: absent)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # vertex → succeeded/failed/running/…
    links: dict[str, str] = field(default_factory=dict)  # vertex → URL (replaces the child-workflow link)


def svg(workflow: ast.Workflow, overlay: Overlay | None = None, *,
        workflow_url: Callable[[str], str] | None = None) -> str:
    """The picture, as an inline ``<svg>`` element. ``workflow_url`` maps a workflow key to
    its page (default: the console's workflow page), for the SPAWNER's link."""
    placed = layout(workflow, RUN_BOX_H if overlay else BOX_H)
    to_url = workflow_url or (lambda key: reverse("ui:workflow-detail", args=[key]))
    css = "workflow-graph run-graph" if overlay else "workflow-graph"
    label = "Run graph" if overlay else "Workflow graph"
    parts = [f'<svg class="{css}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {placed.width:g} {placed.height:g}" '
             f'width="{placed.width:g}" height="{placed.height:g}" role="img" aria-label="{label}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']
    parts += [_edge(route) for route in placed.routes]
    for vid, vertex in workflow.vertices.items():
        link = (overlay.links.get(vid) if overlay else None) or _child_link(vertex, to_url)
        parts.append(_vertex(vertex, placed.boxes[vid], vid == workflow.start, overlay, link))
    parts += [_label(route) for route in placed.routes if route.label_at]  # above every line
    parts.append("</svg>")
    return "\n".join(parts)


def _child_link(vertex: ast.Vertex, to_url: Callable[[str], str]) -> str:
    if isinstance(vertex, ast.Spawner) and vertex.workflow:
        return to_url(vertex.workflow)
    return ""


def _edge(route: Route) -> str:
    edge = route.edge
    path = " ".join(f"{'M' if i == 0 else 'L'} {x:g} {y:g}" for i, (x, y) in enumerate(route.points))
    return (f'<g class="edge edge-{edge.kind}" data-from="{escape(edge.source)}" data-to="{escape(edge.target)}"'
            f' data-label="{escape(edge.label)}"><path d="{path}" marker-end="url(#arrow)"/></g>')


def _label(route: Route) -> str:
    x, y = route.label_at or (0.0, 0.0)
    edge = route.edge
    return (f'<text class="edge-label" x="{x:g}" y="{y:g}" data-from="{escape(edge.source)}" '
            f'data-to="{escape(edge.target)}">{escape(edge.label)}</text>')


def _vertex(vertex: ast.Vertex, box: Box, start: bool, overlay: Overlay | None, link: str) -> str:
    name = vertex.id if len(vertex.id) <= LABEL_CHARS else vertex.id[: LABEL_CHARS - 1] + "…"
    classes = f"vertex kind-{vertex.type.lower()}" + (" start" if start else "")
    status = overlay.statuses.get(vertex.id, "") if overlay else ""
    data = ""
    if overlay is not None:
        classes += f" status-{status.lower()}" if status else " not-reached"
        data = f' data-status="{status or "NOT_REACHED"}"'
    x, y, cx = box.x, box.y, box.x + box.w / 2
    title = f"{vertex.id} ({vertex.type}){_detail(vertex)}" + (f" — {status}" if status else "")
    inner = (f"<title>{escape(title)}</title>"
             f'<rect x="{x:g}" y="{y:g}" width="{box.w:g}" height="{box.h:g}" rx="6"/>'
             f'<text class="name" x="{cx:g}" y="{y + 20:g}">{escape(name)}</text>'
             f'<text class="kind" x="{cx:g}" y="{y + 36:g}">{vertex.type}{" · " + status if status else ""}</text>')
    counts = overlay.counts.get(vertex.id) if overlay else None
    if counts is not None:
        attributes = " ".join(f'data-{k.replace("_", "-")}="{n}"' for k, n in counts.items())
        text = counts_text(counts)
        fit = f' textLength="{box.w - 8:g}" lengthAdjust="spacingAndGlyphs"' if len(text) * 6.2 > box.w - 8 else ""
        inner += (f'<text class="counts" x="{cx:g}" y="{y + 52:g}"{fit} {attributes}>{escape(text)}'
                  f"<title>{escape(', '.join(f'{n:,} {k}' for k, n in counts.items()))}</title></text>")
    if link:
        inner = f'<a href="{escape(link)}" class="vertex-link">{inner}</a>'
    return (f'<g class="{classes}" data-vertex="{escape(vertex.id)}" data-kind="{vertex.type}"{data}>'
            f"{inner}</g>")


def counts_text(counts: dict[str, int]) -> str:
    """A fan-out's counts in a vertex: succeeded and failed always, the others when not zero."""
    shown = [f"{counts.get('succeeded', 0):,} ok", f"{counts.get('failed', 0):,} failed"]
    shown += [f"{n:,} {k}" for k, n in counts.items() if k not in ("succeeded", "failed") and n]
    return " · ".join(shown)


def _detail(vertex: ast.Vertex) -> str:
    if isinstance(vertex, ast.Task):
        return f": {vertex.handler}"
    if isinstance(vertex, ast.Http):
        return f": {vertex.method} {vertex.destination}{vertex.path}"
    if isinstance(vertex, ast.Spawner):
        return f": each of {vertex.items} → {vertex.workflow or vertex.version}"
    if isinstance(vertex, ast.Chain):
        return f": → {vertex.workflow}"
    return ""
