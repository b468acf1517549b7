"""The operator console in a real browser (issue 16, part 6): an operator reads a workflow's
graph and the diff to its previous version, starts it from the Workflows page — a JSON
input refused at the client and at its path by the server, then a JSON Lines file mapped
onto the list field with an idempotency key — and the new execution opens; a failed child
is retried with an edited input, which shows in the view, and the parent succeeds."""

import json
import re

import pytest
from playwright.sync_api import expect

from executions.models import Event, Execution
from executions.selectors import payloads as payload_reads
from tests.support import factories, helpers
from workflows.models import AuditEvent

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(240)]

ITEMS = b"".join(json.dumps({"i": i, "fail": i == 1}).encode() + b"\n" for i in range(3))


def test_operator_starts_from_a_file_reads_the_graph_and_retries_with_an_edited_input(page, ui, operator):
    workspace = factories.default_workspace()
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.entries"))
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.entries",
                                                            merge_config={"failFast": True}))

    # The workflow's page: its current version as a picture.
    ui.log_in(operator, next_path="/workflows/")
    page.get_by_role("link", name="parent", exact=True).click()
    graph = page.locator("#current-graph svg.workflow-graph")
    expect(graph.locator("[data-kind='SPAWNER']")).to_have_attribute("data-vertex", "fan")
    expect(graph.locator("[data-kind='MERGE']")).to_have_attribute("data-vertex", "join")
    expect(graph.locator(".edge-merge[data-from='fan'][data-to='join']")).to_have_count(1)
    expect(graph.locator(".edge")).to_have_count(3)  # fan→join, its merge link, join→done

    # A version's page: the graph and the diff to the previous version.
    page.locator("#versions tbody tr").first.get_by_role("link", name="Graph and diff").click()
    expect(page.locator("#version-graph svg [data-vertex='done']")).to_have_count(1)
    expect(page.locator("#version-diff .add")).to_contain_text(['"failFast": true'])
    expect(page.locator("#version-diff .del")).to_contain_text(['"failFast": false'])
    ui.screenshot("console-1-version-graph-and-diff")
    page.go_back()

    # Not JSON: refused in the browser, nothing sent.
    editor = page.locator("#start-input")
    editor.fill('{"note": ')
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#start-execution [data-json-error]")).to_contain_text("Not JSON")
    # JSON the database cannot store: refused by the server at its path.
    editor.fill('{"entries": [{"bad": "\\u0000"}]}')
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#flash [data-path='$.entries[0].bad']")).to_contain_text("NUL")
    assert not Execution.objects.exists()

    # A JSON Lines file onto the list field, with an idempotency key: the execution opens.
    editor.fill('{"note": "from the browser"}')
    page.locator("#start-file").set_input_files(files=[{"name": "entries.jsonl", "mimeType": "application/x-ndjson",
                                                         "buffer": ITEMS}])
    page.locator("#start-items-at").fill("entries")
    page.locator("#start-key").fill("browser-start-1")
    page.get_by_role("button", name="Start").click()
    expect(page).to_have_url(re.compile(r"/executions/[0-9a-f-]{36}/$"), timeout=15_000)
    parent = Execution.objects.get(idempotency_key="browser-start-1")
    assert page.url.endswith(f"/executions/{parent.pk}/")
    assert payload_reads.input_of(parent) == {"note": "from the browser",
                                              "entries": [{"i": i, "fail": i == 1} for i in range(3)]}
    ui.screenshot("console-2-started-from-a-file")

    # The child with the bad item fails, and the parent with it; fix the item, retry the child.
    helpers.run_engine()
    assert helpers.refresh(parent).status == "FAILED"
    child = Execution.objects.get(parent=parent, status="FAILED")
    page.goto(f"/executions/{child.pk}/")
    page.locator("#retry-edited summary").click()
    retry_editor = page.locator("#retry-input")
    assert json.loads(retry_editor.input_value()) == {"i": 1, "fail": True}
    retry_editor.fill("[1, ")
    page.get_by_role("button", name="Retry with this input").click()
    expect(page.locator("#retry-edited [data-json-error]")).to_contain_text("Not JSON")
    retry_editor.fill('{"i": 1, "fail": false}')
    page.get_by_role("button", name="Retry with this input").click()
    expect(page.locator("#flash")).to_contain_text("with the edited input")
    expect(page.locator("#input-edits")).to_contain_text("by user:oper for this retry")
    ui.screenshot("console-3-retried-with-an-edited-input")
    helpers.run_engine()
    expect(page.locator("#execution-status")).to_have_text("SUCCEEDED", timeout=15_000)
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert payload_reads.input_of(child) == {"i": 1, "fail": False}
    assert Event.objects.filter(execution_id=child.pk, message__startswith="input edited by user:oper").count() == 1

    audit = list(AuditEvent.objects.filter(actor="user:oper").order_by("id").values_list("action", "outcome"))
    assert audit == [("upload.create", "accepted"),
                     ("execution.start", "accepted"), ("execution.retry", "accepted")]
