"""The UI benchmark runs (small, inside the test transaction) and reports what it promises."""

import json

import pytest

from bench import ui

pytestmark = pytest.mark.django_db


def test_the_ui_benchmark_reports_each_view(workspace):
    result = ui.run(children=400, repeats=1)
    json.dumps(result)  # JSON-able, as the bench_ui command prints it
    assert result["children"] == 400
    assert {"page", "header", "steps", "fanout", "children by index", "children by duration", "long tail",
            "long tail, recomputed", "run graph and timeline", "throughput", "throughput, recomputed"
            } <= set(result["results"])
    for name, figures in result["results"].items():
        assert figures["status"] in (200, 286), name
        # A constant number per page, whatever the children (no N+1): 17 since the step timeline
        # reads the waits of its WAITING steps in one more query (issue 32).
        assert figures["queries"] <= 17, name
    assert result["results"]["page"]["bytes"] > 10_000
