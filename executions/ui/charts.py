"""Small charts of the Rate Limits page, drawn by pygal as inline SVG (no script: the page's
fragments are swapped by htmx, and an SVG needs nothing to run).

``flow_chart``: a destination's last minutes — the concurrency limit it had (as it was in each
bucket), the mean number of calls in flight, and the failed and throttled calls per bucket (on
a second axis, since a handful of errors next to a limit of 256 would be invisible on the first).

``sparkline``: one series on its own scale, a small line with its last value (issue 33 §2:
in flight, waiting, errors and p95 latency per destination) — a polyline written here, a
few hundred bytes, rather than pygal's sparkline with its stylesheet."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import pygal
from pygal.style import Style

from executions.selectors.destinations import Bucket

# pygal appends a legacy import hook for its map plugins (pygal.maps.*, unused here) to
# sys.meta_path; Python 3.11 warns (ImportWarning) about it on every import that reaches the
# end of the path, and the tests turn that warning into an error. Take it out again.
sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, pygal.PluginImportFixer)]

STYLE = Style(
    background="transparent", plot_background="transparent", foreground="#334", foreground_strong="#112",
    foreground_subtle="#ccd", opacity=".9", opacity_hover="1", transition="0s",
    colors=("#1a365d", "#3182ce", "#c53030", "#d69e2e"), font_family="system-ui, sans-serif",
    label_font_size=10, major_label_font_size=10, legend_font_size=10, title_font_size=11,
)


def flow_chart(name: str, buckets: Sequence[Bucket], limits: Sequence[int | None], *, bucket_seconds: int,
               width: int = 460, height: int = 180) -> str:
    """The SVG of one destination's recent flow: ``limits`` holds the limit in force in each
    bucket (None: unlimited, not drawn), oldest first like ``buckets``."""
    chart = pygal.Line(
        width=width, height=height, style=STYLE, js=[], disable_xml_declaration=True, explicit_size=True,
        show_dots=False, stroke_style={"width": 1.5}, legend_at_bottom=True, legend_box_size=8,
        show_minor_x_labels=False, x_label_rotation=0, include_x_axis=True, margin=4, spacing=6,
        truncate_label=-1, truncate_legend=-1, legend_at_bottom_columns=4, show_x_guides=False,
        show_y_guides=True, y_labels_major_count=3, show_minor_y_labels=False,
        title=None, tooltip_border_radius=2, no_data_text="no calls", print_values=False,
        value_formatter=lambda v: f"{v:.3g}",  # the second axis's labels fall between whole numbers
        range=(0, max([1.0, *(b.mean_in_flight for b in buckets), *(x for x in limits if x is not None)]) * 1.1),
    )
    chart.x_labels = [_ago(b.ago * bucket_seconds) for b in buckets]
    chart.x_labels_major = [label for b, label in zip(buckets, chart.x_labels, strict=True)
                            if (b.ago * bucket_seconds) % 300 == 0]
    # Solid and thicker than the dashed guides: the limit in force at the end of each bucket.
    # (Dots too: a limit known for one bucket only — a new destination — is still seen.)
    chart.add("limit", list(limits), stroke_style={"width": 2.5}, show_dots=True, dots_size=2)
    chart.add("in flight (mean)", [round(b.mean_in_flight, 1) for b in buckets], fill=False)
    chart.add("errors", [b.errors for b in buckets], secondary=True)
    chart.add("throttled", [b.throttled for b in buckets], secondary=True)
    chart.add_xml_filter(_without_scripts)
    svg = chart.render(is_unicode=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="Calls to {_escape(name)} in the last minutes" ', 1)


def _without_scripts(root: Any) -> Any:
    """pygal always embeds a script with its configuration (for its optional tooltips, which
    are not loaded here): drop it, so a swapped fragment carries no script at all."""
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).endswith("script"):
                parent.remove(child)
    return root


def _ago(seconds: int) -> str:
    return "now" if seconds == 0 else f"-{seconds / 60:g} min"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 120, 26, 2.0


def sparkline(label: str, values: Sequence[float | None], *, color: str = "#3182ce") -> str:
    """The SVG of one series, oldest first (None: no value, a gap), scaled to its own maximum."""
    top = max([0.0, *(v for v in values if v is not None)]) or 1.0
    step = (SPARK_WIDTH - 2 * SPARK_PAD) / max(1, len(values) - 1)
    lines: list[list[str]] = []
    points: list[str] = []
    for i, value in enumerate(values):
        if value is None:
            if points:
                lines.append(points)
            points = []
            continue
        y = SPARK_HEIGHT - SPARK_PAD - value / top * (SPARK_HEIGHT - 2 * SPARK_PAD)
        points.append(f"{SPARK_PAD + i * step:.1f},{y:.1f}")
    if points:
        lines.append(points)
    paths = "".join(f'<polyline points="{" ".join(line)}" fill="none" stroke="{color}" stroke-width="1.5"/>'
                    for line in lines)
    end = lines[-1][-1].split(",") if lines else None
    dot = f'<circle cx="{end[0]}" cy="{end[1]}" r="2" fill="{color}"/>' if end else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_escape(label)}" '
            f'width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}">'
            f'<line x1="0" y1="{SPARK_HEIGHT - SPARK_PAD}" x2="{SPARK_WIDTH}" y2="{SPARK_HEIGHT - SPARK_PAD}" '
            f'stroke="#e2e8f0"/>{paths}{dot}</svg>')
