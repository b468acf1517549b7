"""Exports of a fan-out's children (issue 16 §5): children.jsonl and children.csv stream every
child, viewer role, workspace-scoped, with an optional status filter, in bounded queries."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from executions.core import payloads, records, state
from executions.models import Execution
from executions.selectors import children as child_reads
from tests.support import helpers
from tests.support.clients import api, client_for, problem

pytestmark = pytest.mark.django_db


def body(response: Any) -> bytes:
    assert response.status_code == 200, response.content if not response.streaming else response.status_code
    assert response.streaming, "an export is streamed, never built whole"
    return b"".join(response.streaming_content)


def jsonl(response: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body(response).decode().splitlines()]


def test_every_child_as_json_lines_with_its_output_and_error(workspace: Any) -> None:
    parent = helpers.run_fanout(workspace, 12, failing=(3, 7))
    response = api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children.jsonl")
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"] == f'attachment; filename="children-{parent.pk}.jsonl"'
    rows = jsonl(response)
    assert [row["index"] for row in rows] == list(range(12))
    by_index = {row["index"]: row for row in rows}
    child = Execution.objects.get(parent=parent, item_index=0)
    assert by_index[0] == {"index": 0, "id": str(child.pk), "spawner": "fan", "status": "SUCCEEDED",
                           "attempt": 1, "error": "", "output": {"i": 0, "fail": False},
                           "outputBytes": by_index[0]["outputBytes"]}
    assert by_index[0]["outputBytes"] > 0
    assert by_index[3]["status"] == "FAILED" and by_index[3]["error"] and by_index[3]["output"] is None


def test_failed_only_as_csv(workspace: Any) -> None:
    parent = helpers.run_fanout(workspace, 12, failing=(3, 7))
    response = api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children.csv?status=FAILED")
    assert response["Content-Type"] == "text/csv"
    assert response["Content-Disposition"] == f'attachment; filename="children-{parent.pk}-failed.csv"'
    rows = list(csv.DictReader(io.StringIO(body(response).decode())))
    assert [(row["index"], row["status"]) for row in rows] == [("3", "FAILED"), ("7", "FAILED")]
    assert list(rows[0]) == ["index", "id", "spawner", "status", "attempt", "error", "output", "output_bytes"]
    assert rows[0]["error"] and rows[0]["output"] == ""


def test_an_execution_without_children_exports_an_empty_file(workspace: Any) -> None:
    helpers.publish(workspace, "one", helpers.NOOP)
    execution = helpers.start(workspace, "one", {})
    client = api(workspace, "viewer")
    assert body(client.get(f"/api/v1/executions/{execution.pk}/children.jsonl")) == b""
    assert body(client.get(f"/api/v1/executions/{execution.pk}/children.csv")).decode().strip() == (
        "index,id,spawner,status,attempt,error,output,output_bytes")


def test_other_workspaces_unknown_ids_and_bad_filters_are_problems(workspace: Any, other_workspace: Any) -> None:
    parent = helpers.run_fanout(workspace, 2)
    outsider = api(other_workspace, "admin", name="outsider")
    problem(outsider.get(f"/api/v1/executions/{parent.pk}/children.jsonl"), 404)
    problem(outsider.get(f"/api/v1/executions/{parent.pk}/children.csv"), 404)
    client = api(workspace, "viewer")
    bad = problem(client.get(f"/api/v1/executions/{parent.pk}/children.csv?status=BROKEN"), 400)
    assert "status" in json.dumps(bad)
    problem(client.get(f"/api/v1/executions/{parent.pk}/children.csv?page=2"), 400)
    problem(client.get("/api/v1/executions/00000000-0000-0000-0000-000000000000/children.jsonl"), 404)
    assert client.get(f"/api/v1/executions/{parent.pk}/children.csv", HTTP_ACCEPT="text/csv").status_code == 200


@pytest.mark.parametrize("path", ["children.csv?status=FAILED&status=SUCCEEDED",
                                  "children.jsonl?status=FAILED&status=FAILED",
                                  "children?status=FAILED&status=SUCCEEDED"])
def test_a_filter_given_twice_is_refused_not_read_as_its_last_value(workspace: Any, path: str) -> None:
    parent = helpers.run_fanout(workspace, 3, failing=(1,))
    refused = problem(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/{path}"), 400)
    assert "'status' is given more than once" in refused["detail"] and refused["errors"][0]["field"] == "status"


def test_anonymous_requests_are_refused_and_a_browser_session_may_download(workspace: Any) -> None:
    from rest_framework.test import APIClient

    parent = helpers.run_fanout(workspace, 3)
    assert APIClient().get(f"/api/v1/executions/{parent.pk}/children.jsonl").status_code in (401, 403)
    session = client_for(workspace, "viewer", "browser-viewer")
    assert len(jsonl(session.get(f"/api/v1/executions/{parent.pk}/children.jsonl"))) == 3


def test_a_large_output_is_exported_as_its_size(workspace: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(child_reads, "EXPORT_INLINE_BYTES", 10)
    parent = helpers.run_fanout(workspace, 2)
    rows = jsonl(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children.jsonl"))
    assert all(row["output"] is None and row["outputBytes"] > 10 for row in rows)


def make_children(parent: Execution, count: int, *, failing_every: int) -> None:
    """``count`` children of ``parent`` written directly (the engine would take minutes)."""
    with connection.cursor() as cursor:
        created = records.insert_executions(cursor, [
            records.NewExecution(parent.workspace_id, parent.workflow_id, parent.version_id, parent_id=parent.pk,
                                 root_id=parent.pk, spawn_vertex="fan", item_index=index, depth=1)
            for index in range(count)])
        payloads.put_many(cursor, [(child, "t", json.dumps({"n": index})) for child, index in created])
        done = [(child, index) for child, index in created if index % failing_every]
        state.succeed_executions(cursor, [c for c, _ in done], output_vertices=["t"] * len(done),
                                 started=[None] * len(done))
        bad = [child for child, index in created if not index % failing_every]
        state.fail_executions(cursor, bad, errors=["=HYPERLINK(\"x\") boom"] * len(bad), started=[None] * len(bad))


def test_5000_children_stream_in_queries_proportional_to_pages(workspace: Any) -> None:
    helpers.publish(workspace, "one", helpers.NOOP)
    parent = helpers.start(workspace, "one", {})
    make_children(parent, 5000, failing_every=10)
    client = api(workspace, "viewer")
    response = client.get(f"/api/v1/executions/{parent.pk}/children.jsonl")
    with CaptureQueriesContext(connection) as queries:
        lines = body(response).splitlines()
    assert len(lines) == 5000
    pages = 5000 // child_reads.EXPORT_PAGE + 1
    assert len(queries) <= pages, f"{len(queries)} queries for {pages} pages"
    assert json.loads(lines[4321]) | {"id": None} == {
        "index": 4321, "id": None, "spawner": "fan", "status": "SUCCEEDED", "attempt": 1, "error": "",
        "output": {"n": 4321}, "outputBytes": json.loads(lines[4321])["outputBytes"]}
    failed = list(csv.reader(io.StringIO(body(client.get(
        f"/api/v1/executions/{parent.pk}/children.csv?status=FAILED")).decode())))
    assert len(failed) == 1 + 500
    assert failed[1][5].startswith("'=HYPERLINK"), "a formula-like cell is neutralised for spreadsheets"


def test_the_export_reads_one_page_at_a_time(workspace: Any) -> None:
    """The generator holds one page: after the first row only the first page was fetched."""
    helpers.publish(workspace, "one", helpers.NOOP)
    parent = helpers.start(workspace, "one", {})
    make_children(parent, 250, failing_every=7)
    with CaptureQueriesContext(connection) as queries:
        rows = child_reads.export(parent, page_size=100)
        first = next(rows)
        assert (first.index, len(queries)) == (0, 1)
        rest = list(rows)
    assert len(rest) == 249 and len(queries) == 3
