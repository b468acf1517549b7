"""A fan-out's throughput as a pygal stacked bar chart (inline SVG, no script): children
succeeded, failed and cancelled per bucket of the run (selectors/throughput.py)."""

from __future__ import annotations

import sys
from typing import Any

import pygal
from pygal.style import Style

from executions.selectors.throughput import Throughput
from executions.ui import present

# pygal appends a legacy import hook for its map plugins to sys.meta_path (see charts.py).
sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, pygal.PluginImportFixer)]

STYLE = Style(
    background="transparent", plot_background="transparent", foreground="#334", foreground_strong="#112",
    foreground_subtle="#ccd", opacity=".95", opacity_hover="1", transition="0s",
    colors=("#2f855a", "#c53030", "#718096"), font_family="system-ui, sans-serif",
    label_font_size=10, major_label_font_size=10, legend_font_size=10, title_font_size=11,
)


def svg(spawner: str, data: Throughput, *, width: int = 600, height: int = 170) -> str:
    chart = pygal.StackedBar(
        width=width, height=height, style=STYLE, js=[], disable_xml_declaration=True, explicit_size=True,
        legend_at_bottom=True, legend_box_size=8, legend_at_bottom_columns=3, show_minor_x_labels=False,
        x_label_rotation=0, margin=4, spacing=6, truncate_label=-1, truncate_legend=-1, show_x_guides=False,
        show_y_guides=True, y_labels_major_count=3, show_minor_y_labels=False, print_values=False,
        no_data_text="no child finished yet", min_scale=2, max_scale=4,
    )
    labels = [f"+{present.duration(b.start)}" if b.start else "0" for b in data.buckets]
    chart.x_labels = labels
    every = max(1, len(labels) // 6)
    chart.x_labels_major = labels[::every]
    chart.add("succeeded", [b.succeeded for b in data.buckets])
    chart.add("failed", [b.failed for b in data.buckets])
    if data.cancelled:
        chart.add("cancelled", [b.cancelled for b in data.buckets])
    chart.add_xml_filter(_without_scripts)
    rendered = chart.render(is_unicode=True)
    label = f"Children of {spawner} finished per {present.duration(data.width)}"
    return rendered.replace("<svg ", f'<svg role="img" aria-label="{_escape(label)}" ', 1)


def _without_scripts(root: Any) -> Any:
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).endswith("script"):
                parent.remove(child)
    return root


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
