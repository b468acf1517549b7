"""Issue 14 §7: a MERGE's output scales. Up to ``MERGE_INLINE_ITEMS`` children it holds every
child's output (``$.steps.<merge>.output.items`` works downstream); beyond, it holds the counts
and the size only — never one jsonb of every output, which PostgreSQL caps at ~256 MB — and
readers page through the children's own outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from executions.models import Payload
from tests.support import helpers
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}}


def run(workspace: Any, items: int, *, failing: tuple[int, ...] = ()) -> Any:
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc(
        "child", merge_config={"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}))
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i in failing} for i in range(items)]})
    helpers.run_engine()
    parent = helpers.refresh(parent)
    assert parent.status == "SUCCEEDED"
    return parent


def merge_output(parent: Any) -> Any:
    data = Payload.objects.get(execution=parent, name="join").data
    return json.loads(data) if isinstance(data, str) else data


def pages(client: Any, url: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    while url:
        body = ok(client.get(url))
        results.extend(body["results"])
        url = body["next"]
    return results


def test_a_large_merge_stores_counts_not_every_output_and_pages_them(workspace, settings):
    settings.SB = {**settings.SB, "MERGE_INLINE_ITEMS": 10}
    parent = run(workspace, 25, failing=(3, 17))
    stored = merge_output(parent)
    assert "items" not in stored, "beyond MERGE_INLINE_ITEMS the outputs stay with the children"
    assert stored["counts"] == {"SUCCEEDED": 23, "FAILED": 2, "CANCELLED": 0}
    assert stored["total"] == 25 and stored["itemsPaged"] is True
    client = api(workspace, "viewer")
    first = ok(client.get(f"/api/v1/executions/{parent.pk}/steps/join/output?limit=10"))
    assert first["counts"] == stored["counts"] and first["total"] == 25 and first["next"]
    results = pages(client, f"/api/v1/executions/{parent.pk}/steps/join/output?limit=10")
    assert [r["index"] for r in results] == list(range(25))
    assert [r["status"] for r in results if r["output"] is None] == ["FAILED", "FAILED"]
    assert results[5]["output"] == {"i": 5, "fail": False}


def test_a_small_merge_keeps_its_items_inline_and_pages_the_same(workspace):
    parent = run(workspace, 4, failing=(1,))
    stored = merge_output(parent)
    assert stored["items"] == [{"i": 0, "fail": False}, None, {"i": 2, "fail": False}, {"i": 3, "fail": False}]
    results = pages(api(workspace, "viewer"), f"/api/v1/executions/{parent.pk}/steps/join/output?limit=3")
    assert [r["output"] for r in results] == stored["items"]


def test_paging_a_vertex_that_is_not_a_merge_is_a_precise_404(workspace):
    parent = run(workspace, 2)
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/steps/fan/output"), 404)
    assert "MERGE" in body["detail"]
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/steps/nope/output"), 404)
    assert "nope" in body["detail"]


def test_the_execution_page_outlines_a_large_merge_output(workspace, settings):
    from django.urls import reverse

    from tests.support.clients import client_for

    settings.SB = {**settings.SB, "MERGE_INLINE_ITEMS": 10}
    parent = run(workspace, 12)
    page = client_for(workspace, "viewer").get(reverse("ui:execution-detail", args=[parent.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "itemsPaged" in html and "&quot;SUCCEEDED&quot;: 12" in html
