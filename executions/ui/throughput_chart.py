"""A fan-out's throughput as an inline SVG stacked bar chart (no script): children succeeded,
failed and cancelled per bucket of the run (selectors/throughput.py).

Drawn by hand like the long tail's histogram rather than by pygal (charts.py): it is
re-rendered on every poll of a running fan-out, and pygal's rendering of 60 bars costs more
than the rest of the fragment together.
"""

from __future__ import annotations

from django.utils.html import escape

from executions.selectors.throughput import Throughput
from executions.ui import present

WIDTH, HEIGHT = 640, 150
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 8, 22
SERIES = (("succeeded", "#2f855a"), ("failed", "#c53030"), ("cancelled", "#718096"))


def svg(spawner: str, data: Throughput) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = max([b.finished for b in data.buckets] + [1])
    scale = _nice(top)
    label = f"Children of {spawner} finished per {present.duration(data.width)}"
    parts = [f'<svg class="throughput-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(label)}">']
    for tick in (0, scale / 2, scale):
        y = TOP + plot_h * (1 - tick / scale)
        parts.append(f'<line class="gridline" x1="{LEFT}" y1="{y:g}" x2="{WIDTH - RIGHT}" y2="{y:g}"/>'
                     f'<text class="axis y" x="{LEFT - 4}" y="{y + 3:g}">{tick:,.0f}</text>')
    count = max(1, len(data.buckets))
    slot = plot_w / count
    every = max(1, count // 6)
    for i, bucket in enumerate(data.buckets):
        x = LEFT + i * slot
        y = TOP + plot_h
        values = {"succeeded": bucket.succeeded, "failed": bucket.failed, "cancelled": bucket.cancelled}
        title = (f"{present.duration(bucket.start)}–{present.duration(bucket.start + data.width)}: "
                 + ", ".join(f"{n:,} {name}" for name, n in values.items() if n or name != "cancelled"))
        parts.append(f'<g class="bucket" data-start="{bucket.start:g}" data-succeeded="{bucket.succeeded}" '
                     f'data-failed="{bucket.failed}" data-cancelled="{bucket.cancelled}">'
                     f'<title>{escape(title)}</title>')
        for name, colour in SERIES:
            n = values[name]
            if not n:
                continue
            h = plot_h * n / scale
            y -= h
            parts.append(f'<rect class="bar bar-{name}" x="{x + slot * 0.1:g}" y="{y:g}" '
                         f'width="{max(slot * 0.8, 1):g}" height="{h:g}" fill="{colour}"/>')
        parts.append("</g>")
        if i % every == 0:
            parts.append(f'<text class="axis x" x="{x:g}" y="{HEIGHT - 6}">'
                         f'{"0" if not bucket.start else "+" + present.duration(bucket.start)}</text>')
    if not data.finished:
        parts.append(f'<text class="empty-chart" x="{WIDTH / 2:g}" y="{HEIGHT / 2:g}">no child finished yet</text>')
    parts.append("</svg>")
    return "".join(parts)


def _nice(top: int) -> float:
    """A round axis maximum at or above ``top``: 1, 2 or 5 times a power of ten."""
    power = 1
    while True:
        for step in (1, 2, 5):
            if step * power >= top:
                return float(step * power)
        power *= 10
