"""Where a workflow graph's vertices, edges and edge labels go: pure geometry, no SVG.

Layers run top to bottom (a vertex's layer is its longest path from the start), the
vertices of a layer left to right in document order. Between two layers lies a gap that no
vertex occupies; every edge is routed orthogonally through gaps and free vertical
channels, so it never passes behind a vertex:

- it leaves its source from a *port* on the source's bottom side (the source's edges spread
  along it, ordered by where their targets are), drops into the gap below, runs sideways
  on a lane of that gap (each edge crossing a gap has its own lane);
- an edge that skips layers goes down a channel: an x at which no vertex of the skipped
  layers stands (between two vertices, or in the margins left and right);
- it enters its target from a port on the target's top side.

An edge's label sits in the label band at the top of the gap under its source, beside its
port, labels of one source staggered on two rows: a label never overlaps a vertex.
(An edge that goes upwards — only an unreachable vertex, which the validator refuses, has
one — runs in the right margin and enters its target from the right.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.dsl import ast

BOX_W, BOX_H = 168, 46
GAP_X, GAP_Y = 36, 80
MARGIN_X, MARGIN_Y = 44, 16
LABEL_BAND = 36  # the top of each gap: edge labels (two staggered rows, baselines 16 and 30 px down)
LANE = 6  # the spacing of edges that run sideways in one gap
CHANNEL_PAD = 10  # how far a channel keeps from the vertices beside it
LABEL_CHAR_W, LABEL_H = 6.2, 14  # a 10px label's estimated size (ascent 11, descent 3)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""
    kind: str = "next"  # next | branch | merge


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: Box) -> bool:
        return (self.x < other.x + other.w and other.x < self.x + self.w
                and self.y < other.y + other.h and other.y < self.y + self.h)

    def crossed_by(self, a: tuple[float, float], b: tuple[float, float]) -> bool:
        """Whether the axis-parallel segment a–b passes through the box's inside (running
        along its border or ending on it is not crossing)."""
        (x1, y1), (x2, y2) = a, b
        if x1 == x2:
            return self.x < x1 < self.x + self.w and _overlap(min(y1, y2), max(y1, y2), self.y, self.y + self.h)
        if y1 == y2:
            return self.y < y1 < self.y + self.h and _overlap(min(x1, x2), max(x1, x2), self.x, self.x + self.w)
        raise ValueError("only axis-parallel segments are drawn")


def _overlap(lo: float, hi: float, start: float, end: float) -> bool:
    return min(hi, end) - max(lo, start) > 1e-9


@dataclass(frozen=True)
class Route:
    edge: Edge
    points: list[tuple[float, float]]
    label_at: tuple[float, float] | None = None  # the label's text anchor (start, baseline)
    label_box: Box | None = None


@dataclass
class Layout:
    width: float
    height: float
    boxes: dict[str, Box]
    routes: list[Route] = field(default_factory=list)


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


def layout(workflow: ast.Workflow, box_h: float = BOX_H) -> Layout:
    links = edges(workflow)
    layer_of = layers(workflow, links)
    grouped: dict[int, list[str]] = {}
    for vid in workflow.vertices:
        grouped.setdefault(layer_of[vid], []).append(vid)
    rows = [grouped[layer] for layer in sorted(grouped)]
    row_of = {vid: number for number, row in enumerate(rows) for vid in row}
    widest = max(len(row) for row in rows)
    width = 2 * MARGIN_X + widest * BOX_W + (widest - 1) * GAP_X
    height = 2 * MARGIN_Y + len(rows) * box_h + (len(rows) - 1) * GAP_Y
    boxes: dict[str, Box] = {}
    for number, row in enumerate(rows):
        offset = (width - (len(row) * BOX_W + (len(row) - 1) * GAP_X)) / 2
        for position, vid in enumerate(row):
            boxes[vid] = Box(offset + position * (BOX_W + GAP_X), MARGIN_Y + number * (box_h + GAP_Y), BOX_W, box_h)
    return Layout(width, height, boxes, _Router(rows, row_of, boxes, width, box_h).routes(links))


class _Router:
    def __init__(self, rows: list[list[str]], row_of: dict[str, int], boxes: dict[str, Box], width: float,
                 box_h: float) -> None:
        self.rows, self.row_of, self.boxes, self.width, self.box_h = rows, row_of, boxes, width, box_h
        self.lanes: dict[int, int] = {}  # gap (the row above it) → lanes taken
        self.channels: dict[tuple[int, int], int] = {}  # skipped rows → channel edges placed

    def routes(self, links: list[Edge]) -> list[Route]:
        """Two passes: the first finds where each edge comes down towards its target (its
        channel, or its source's port); the second orders each target's ports by that, so
        edges arriving side by side do not cross on the way in."""
        out_ports = self._ports(links, outgoing=True)
        approach = {n: self.boxes[e.source].x for n, e in enumerate(links)}
        for _ in range(2):
            self.lanes, self.channels = {}, {}
            in_ports = self._ports(links, outgoing=False, order=approach)
            found = []
            for number, edge in enumerate(links):
                start, end = out_ports[number], in_ports[number]
                rs, rt = self.row_of[edge.source], self.row_of[edge.target]
                points = self._upwards(edge) if rt <= rs else self._downwards(start, end, rs, rt)
                found.append(Route(edge, points))
                approach[number] = points[0][0] if rt == rs + 1 else points[-3][0] if len(points) >= 3 else start
        return self._labelled(found)

    def _labelled(self, routes: list[Route]) -> list[Route]:
        """Each label beside its edge's start, in the label band under its source: on the
        first of the band's two rows where it overlaps no label placed before it, else
        moved right until it does not."""
        placed: list[Box] = []
        out = []
        for route in sorted(routes, key=lambda r: (self.row_of[r.edge.source], r.points[0][0])):
            if not route.edge.label:
                out.append(route)
                continue
            source = self.boxes[route.edge.source]
            w = len(route.edge.label) * LABEL_CHAR_W + 2
            x = route.points[0][0] + 3
            while True:
                boxes = [Box(x - 1, source.y + source.h + 5 + 14 * k, w, LABEL_H) for k in (0, 1)]
                free = next((b for b in boxes if not any(b.overlaps(p) for p in placed)), None)
                if free is not None:
                    break
                x += 4
            placed.append(free)
            out.append(Route(route.edge, route.points, (x, free.y + LABEL_H - 3), free))
        order = {id(r.edge): n for n, r in enumerate(routes)}
        return sorted(out, key=lambda r: order[id(r.edge)])

    def _ports(self, links: list[Edge], *, outgoing: bool, order: dict[int, float] | None = None
               ) -> dict[int, float]:
        """Each edge's x on its source's bottom (or its target's top): a vertex's edges spread
        evenly along the side — outgoing ones ordered by their target's x (of two to one
        column, the longer on the right: it takes the channel on that side), incoming ones
        by ``order`` (where they come down)."""
        ends: dict[str, list[int]] = {}
        for number, edge in enumerate(links):
            ends.setdefault(edge.source if outgoing else edge.target, []).append(number)
        ports: dict[int, float] = {}
        for vid, numbers in ends.items():
            box = self.boxes[vid]
            if outgoing:
                numbers.sort(key=lambda n: (self.boxes[links[n].target].x, self.row_of[links[n].target], n))
            else:
                numbers.sort(key=lambda n: ((order or {}).get(n, 0.0), n))
            for k, n in enumerate(numbers):
                ports[n] = box.x + box.w * (k + 1) / (len(numbers) + 1)
        return ports

    def _row_bottom(self, row: int) -> float:
        return MARGIN_Y + row * (self.box_h + GAP_Y) + self.box_h

    def _lane(self, gap: int) -> float:
        """A y of its own in the gap under ``row`` (below the label band)."""
        taken = self.lanes.get(gap, 0)
        self.lanes[gap] = taken + 1
        usable = max(1, int((GAP_Y - LABEL_BAND - 8) // LANE))
        return self._row_bottom(gap) + LABEL_BAND + 4 + LANE * (taken % usable)

    def _downwards(self, start: float, end: float, rs: int, rt: int) -> list[tuple[float, float]]:
        top = self._row_bottom(rs)
        target_top = MARGIN_Y + rt * (self.box_h + GAP_Y)
        first = self._lane(rs)
        if rt == rs + 1:
            return _simplified([(start, top), (start, first), (end, first), (end, target_top)])
        channel = self._channel(range(rs + 1, rt), start)
        last = self._lane(rt - 1)
        return _simplified([(start, top), (start, first), (channel, first), (channel, last), (end, last),
                            (end, target_top)])

    def _channel(self, skipped: range, wanted: float) -> float:
        """The free x nearest ``wanted`` through every row of ``skipped``; edges through the
        same rows take the channel side by side."""
        blocked = sorted((b.x - CHANNEL_PAD, b.x + b.w + CHANNEL_PAD)
                         for row in skipped for b in (self.boxes[v] for v in self.rows[row]))
        free, cursor = [], 4.0
        for lo, hi in blocked:
            if lo > cursor:
                free.append((cursor, lo))
            cursor = max(cursor, hi)
        if cursor < self.width - 4:
            free.append((cursor, self.width - 4.0))
        key = (skipped.start, skipped.stop)
        nth = self.channels.get(key, 0)
        self.channels[key] = nth + 1
        lo, hi = min(free, key=lambda span: abs(min(max(wanted, span[0]), span[1]) - wanted))
        x = min(max(wanted, lo + 2), hi - 2)
        shifted = x + LANE * nth * (1 if x + LANE * nth <= hi - 2 else -1)
        return min(max(shifted, lo + 1), hi - 1)

    def _upwards(self, edge: Edge) -> list[tuple[float, float]]:
        source, target = self.boxes[edge.source], self.boxes[edge.target]
        x = self.width - 8 - LANE * self.channels.setdefault((-1, -1), 0)
        self.channels[(-1, -1)] += 1
        sy, ty = source.y + source.h / 2, target.y + target.h / 2
        return [(source.x + source.w, sy), (x, sy), (x, ty), (target.x + target.w, ty)]


def _simplified(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Without repeated points and the middle of straight runs."""
    out: list[tuple[float, float]] = []
    for point in points:
        if out and out[-1] == point:
            continue
        if len(out) >= 2 and (out[-2][0] == out[-1][0] == point[0] or out[-2][1] == out[-1][1] == point[1]):
            out[-1] = point
            continue
        out.append(point)
    return out
