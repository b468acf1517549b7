"""Operator UI reads: login, the executions list, the execution view and its live
fragments — permissions, tenancy, bad input (4xx with a precise message, never a 500)
and bounded queries."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from demo import workflows as demo_workflows
from executions import selectors
from executions.models import Destination, Execution
from tests.support import helpers
from tests.support.clients import client_for, text
from tests.support.factories import member
from workflows.models import Role

pytestmark = pytest.mark.django_db

STRICT = helpers.fanout_doc()  # no tolerance: one failed child fails the merge
FAILING = {0, 7, 13}


def items(n: int) -> list[dict]:
    return [{"i": i, "fail": i in FAILING} for i in range(n)]


@pytest.fixture
def failed_fanout(workspace) -> Execution:
    """A parent whose strict merge failed: 20 children, 3 of them FAILED."""
    execution = helpers.run_fanout(workspace, 20, failing=FAILING, idempotency_key="nightly-2026-01-31")
    assert execution.status == "FAILED"
    return execution


def detail(execution, name="execution-detail", *args) -> str:
    return reverse(f"ui:{name}", args=[execution.pk, *args])


# --- login ----------------------------------------------------------------------------------------

def test_pages_need_a_login(failed_fanout):
    anonymous = Client()
    for url in ["/executions/", detail(failed_fanout), detail(failed_fanout, "execution-header"), "/rate-limits/"]:
        response = anonymous.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_an_expired_session_sends_htmx_polls_to_the_login_page(failed_fanout):
    response = Client().get(detail(failed_fanout, "execution-header"), HTTP_HX_REQUEST="true",
                            HTTP_HX_CURRENT_URL=f"http://testserver{detail(failed_fanout)}")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/accounts/login/?next={detail(failed_fanout)}"


def test_logging_in_lands_on_the_executions_list(workspace):
    member(workspace, Role.VIEWER, "alice", password="correct horse")
    client = Client()
    assert b'name="password"' in client.get("/accounts/login/").content
    refused = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert refused.status_code == 200 and b"correct username and password" in refused.content
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse"}, follow=True)
    assert response.redirect_chain[-1][0] == "/executions/"
    assert b"viewer in default" in response.content


@pytest.mark.parametrize("path", ["/accounts/password_reset/", "/accounts/password_reset/done/",
                                  "/accounts/reset/MQ/set-password/", "/accounts/reset/done/"])
def test_there_is_no_anonymous_password_reset(path):
    """It would mail a reset link to anyone who asks, unthrottled; this product sends no mail."""
    client = Client()
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "alice@example.com"}).status_code == 404


def test_a_logged_in_user_logs_out_and_changes_a_password(workspace):
    member(workspace, Role.VIEWER, "alice", password="correct horse")
    client = Client()
    assert client.login(username="alice", password="correct horse")
    assert client.get("/accounts/password_change/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/accounts/password_change/").status_code == 302  # to the login page


def test_a_user_without_a_workspace_is_refused(workspace):
    response = client_for(workspace, None).get("/executions/")
    assert response.status_code == 403
    assert b"not a member of any workspace" in response.content


# --- executions list -------------------------------------------------------------------------------

def test_list_filters_by_status_workflow_scope_and_search(operator, failed_fanout, workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    other = helpers.start(workspace, "noop", {})
    child = Execution.objects.filter(parent=failed_fanout, status="FAILED").first()

    def ids(**params) -> set[str]:
        response = operator.get("/executions/", params)
        assert response.status_code == 200, response.content
        return {str(row.pk) for row in response.context["page"].rows}

    assert ids() == {str(failed_fanout.pk), str(other.pk)}  # top-level only by default
    assert len(ids(scope="all")) == 22
    assert ids(status="FAILED") == {str(failed_fanout.pk)}
    assert ids(status="FAILED", scope="all") == {str(failed_fanout.pk)} | {
        str(pk) for pk in Execution.objects.filter(parent=failed_fanout, status="FAILED").values_list("pk", flat=True)}
    assert ids(workflow="noop") == {str(other.pk)}
    assert ids(q=str(child.pk)) == {str(child.pk)}  # an id finds a child too
    assert ids(q="nightly-2026-01-31") == {str(failed_fanout.pk)}
    assert ids(q="no-such-key") == set()
    assert ids(range="1h") == {str(failed_fanout.pk), str(other.pk)}
    assert ids(since="2000-01-01T00:00", until="2000-01-02T00:00") == set()


def test_list_pages_without_counting(operator, workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    for _ in range(selectors.executions.PAGE_SIZE + 3):
        helpers.start(workspace, "noop", {})
    first = operator.get("/executions/")
    second = operator.get("/executions/", {"page": 2})
    assert len(first.context["rows"]) == selectors.executions.PAGE_SIZE and first.context["page"].has_next
    assert len(second.context["rows"]) == 3 and not second.context["page"].has_next


@pytest.mark.parametrize(("params", "message"), [
    ({"status": "DONE"}, "'DONE' is not a status"),
    ({"workflow": "nope"}, "there is no workflow 'nope' in this workspace"),
    ({"scope": "everything"}, "'everything' is not a scope"),
    ({"range": "1y"}, "'1y' is not a time range"),
    ({"since": "yesterday"}, "'since' must be a date and time"),
    ({"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"}, "'since' must be before 'until'"),
    ({"page": "0"}, "page: Ensure this value is greater than or equal to 1"),
    ({"page": "x"}, "page: Enter a whole number"),
])
def test_list_explains_bad_filters(operator, params, message):
    response = operator.get("/executions/", params)
    assert response.status_code == 400
    assert message in text(response)


# --- the execution view ----------------------------------------------------------------------------

def test_execution_view_counts_match_the_database(operator, failed_fanout):
    response = operator.get(detail(failed_fanout))
    assert response.status_code == 200
    html = response.content.decode()
    in_db = helpers.child_counts(failed_fanout)
    assert in_db == {"SUCCEEDED": 17, "FAILED": 3}
    assert '<span class="n" data-count="SUCCEEDED">17</span>' in html
    assert '<span class="n" data-count="FAILED">3</span>' in html
    assert '<span class="n" data-count="NEVER_STARTED">0</span>' in html
    assert "3 failed of 20; no failure tolerated; failFast off" in html
    assert "Retry all failed (3)" in html
    assert f"@{failed_fanout.version.short_hash}" in html
    assert "nightly-2026-01-31" in html
    for index in FAILING:  # the failed children, each with its own Retry button
        assert f'id="child-fan-{index}" data-index="{index}" data-status="FAILED"' in html


def test_a_child_shows_its_lineage(operator, failed_fanout):
    child = Execution.objects.get(parent=failed_fanout, item_index=7)
    html = operator.get(detail(child)).content.decode()
    assert f'href="{detail(failed_fanout)}"' in html  # breadcrumb back to the parent
    assert "child #7 of <code>fan</code>" in html
    assert "Retry this child" in html
    assert "failed on purpose" in html


def test_a_viewer_sees_no_action_buttons(viewer, failed_fanout):
    html = viewer.get(detail(failed_fanout)).content.decode()
    assert "Retry all failed" not in html and ">Retry<" not in html and "Cancel execution" not in html


def test_unknown_and_foreign_ids_are_not_found(operator, failed_fanout, other_workspace):
    helpers.publish(other_workspace, "noop", helpers.NOOP)
    foreign = helpers.start(other_workspace, "noop", {})
    for url in [reverse("ui:execution-detail", args=[uuid.uuid4()]), detail(foreign),
                detail(foreign, "execution-header"), detail(failed_fanout, "execution-fanout", "nope"),
                detail(failed_fanout, "execution-children", "nope"), "/executions/not-a-uuid/"]:
        assert operator.get(url).status_code == 404, url
    assert "no fan-out 'nope'" in text(operator.get(detail(failed_fanout, "execution-fanout", "nope")))


def test_fragments_stop_polling_once_terminal(operator, failed_fanout):
    for name, args in [("execution-header", []), ("execution-steps", []), ("execution-body", []),
                       ("execution-fanout", ["fan"]),
                       ("execution-children", ["fan"]), ("execution-long-tail", [])]:
        response = operator.get(detail(failed_fanout, name, *args), HTTP_HX_REQUEST="true")
        assert response.status_code == 286, name  # htmx stops polling on 286
        assert 'data-live="no"' in response.content.decode()
        assert "every 2s" not in response.content.decode()


def test_live_fragments_poll_and_answer_204_when_unchanged(operator, workspace):
    helpers.publish(workspace, "hello", demo_workflows.HELLO)
    execution = helpers.start(workspace, "hello", {"who": "ops"})  # not run: stays PENDING
    url = detail(execution, "execution-steps")
    first = operator.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="execution-steps")
    assert first.status_code == 200
    html = first.content.decode()
    assert 'hx-trigger="every 2s, sb-changed from:body"' in html
    version = html.split('hx-vals=\'{"v": "')[1].split('"')[0]
    unchanged = operator.get(url, {"v": version}, HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="execution-steps")
    assert unchanged.status_code == 204
    # Anything else inside the fragment (a filter link) inherits v but always gets content.
    assert operator.get(url, {"v": version}, HTTP_HX_REQUEST="true").status_code == 200
    assert operator.get(url, {"v": "stale"}, HTTP_HX_REQUEST="true",
                        HTTP_HX_TRIGGER="execution-steps").status_code == 200


def test_the_body_polls_by_its_structure_and_answers_204_until_a_panel_appears(operator, workspace):
    """Issue 33 §1: the page's body (input, fan-outs, downloads, long tail) is re-rendered only
    when its structure changes: the page's own fingerprint matches the first poll's."""
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    execution = helpers.start(workspace, "parent", {"items": [{"i": 0}, {"i": 1}]})
    page = operator.get(detail(execution)).content.decode()
    body = page[page.index('id="execution-body"'):]
    version = body.split('hx-vals=\'{"v": "')[1].split('"')[0]
    url = detail(execution, "execution-body")
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TRIGGER": "execution-body"}
    assert operator.get(url, {"v": version}, **poll).status_code == 204
    assert 'id="fanout-fan"' not in body
    helpers.run_engine()  # the spawner runs: a fan-out appears (and the run ends)
    grown = operator.get(url, {"v": version}, **poll)
    assert grown.status_code == 286 and 'id="fanout-fan"' in grown.content.decode()


def test_children_table_filters_sorts_and_pages(operator, workspace):
    execution = helpers.run_fanout(workspace, 120, failing=FAILING)
    url = detail(execution, "execution-children", "fan")

    def rows(**params) -> list[tuple[int, str]]:
        response = operator.get(url, params, HTTP_HX_REQUEST="true")
        assert response.status_code == 286, response.content
        return [(r.index, r.status) for r in response.context["rows"]]

    assert rows() == [(i, "FAILED" if i in FAILING else "SUCCEEDED") for i in range(50)]
    assert [i for i, _ in rows(page=3)] == list(range(100, 120))
    assert rows(page=99) == rows(page=3)  # past the end: the last page
    assert rows(status="FAILED") == [(i, "FAILED") for i in sorted(FAILING)]
    assert [i for i, _ in rows(status="SUCCEEDED", page=3)] == [i for i in range(120) if i not in FAILING][100:]
    assert len(rows(sort="duration")) == 50
    assert sorted(rows(sort="duration", status="FAILED")) == [(i, "FAILED") for i in sorted(FAILING)]


@pytest.mark.parametrize(("params", "message"), [
    ({"status": "LOST"}, "'LOST' is not a child status"),
    ({"sort": "size"}, "'size' is not a sort order"),
    ({"page": "-1"}, "page: Ensure this value is greater than or equal to 1"),
])
def test_children_table_explains_bad_input(operator, failed_fanout, params, message):
    response = operator.get(detail(failed_fanout, "execution-children", "fan"), params, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#flash"
    assert message in text(response)


def test_sorting_by_duration_lists_the_slowest_first(operator, failed_fanout):
    with connection.cursor() as cursor:  # give child 11 the longest run
        cursor.execute("UPDATE executions_execution SET finished_at = started_at + interval '1 hour' "
                       "WHERE parent_id = %s AND item_index = 11", [failed_fanout.pk])
    response = operator.get(detail(failed_fanout, "execution-children", "fan"), {"sort": "duration"},
                            HTTP_HX_REQUEST="true")
    assert response.context["rows"][0].index == 11
    assert response.context["rows"][0].duration == "1 h 00 min"


def test_long_tail_reports_percentiles_histogram_and_slowest(operator, failed_fanout):
    response = operator.get(detail(failed_fanout, "execution-long-tail"), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 286
    assert 'id="tail-p50"' in html and 'id="tail-p99"' in html
    assert html.count("<rect ") == 20
    assert len(response.context["slowest"]) == 10
    tail = selectors.fanouts.long_tail(failed_fanout.pk)
    assert tail.count == 20 and sum(n for _, _, n in tail.buckets) == 20
    assert tail.slowest[0].seconds == tail.max


def test_the_page_costs_the_same_queries_for_5_or_60_children(operator, workspace):
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", STRICT)
    small, large = (helpers.start(workspace, "parent", {"items": items(n)}) for n in (5, 60))
    helpers.run_engine()

    def queries_for(url: str) -> int:
        operator.get(url)  # warm caches
        with CaptureQueriesContext(connection) as captured:
            assert operator.get(url, HTTP_HX_REQUEST="true").status_code in (200, 286)
        return len(captured)

    for name, args in [("execution-detail", []), ("execution-children", ["fan"]), ("execution-fanout", ["fan"]),
                       ("execution-steps", []), ("execution-header", [])]:
        assert queries_for(detail(small, name, *args)) == queries_for(detail(large, name, *args)), name


def test_steps_say_what_they_wait_for(operator, workspace):
    # A long timer: the demo's 2 s one can fire while a loaded machine runs the engine.
    helpers.publish(workspace, "sleepy", {"start": "pause", "vertices": {
        "pause": {"type": "TIMER", "seconds": 600, "next": "done"}, "done": {"type": "SUCCEED"}}})
    timer = helpers.start(workspace, "sleepy", {"who": "ops"})
    backoff_doc = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.fail_if",
                                                    "retry": {"maxAttempts": 3, "backoffSeconds": 600}}}}
    helpers.publish(workspace, "backoff", backoff_doc)
    backoff = helpers.start(workspace, "backoff", {"fail": True})
    Destination.objects.create(workspace=workspace, name="closed", base_url="http://127.0.0.1:9", concurrency_limit=0)
    helpers.publish(workspace, "call", {"start": "c", "vertices": {
        "c": {"type": "HTTP", "destination": "closed", "method": "POST", "path": "/x"}}})
    slot = helpers.start(workspace, "call", {})
    helpers.run_engine()

    def wait_text(execution) -> str:
        return text(operator.get(detail(execution, "execution-steps"), HTTP_HX_REQUEST="true"))

    assert "waiting for timer" in wait_text(timer)
    assert "waiting for retry backoff" in wait_text(backoff)
    assert "failed on purpose" in wait_text(backoff)
    assert "waiting for destination slot" in wait_text(slot)
    assert "destination 'closed' has no free slot (0 in flight, limit 0)" in wait_text(slot)


def test_large_inputs_are_outlined_not_shipped(workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    entries = [{"id": f"entry-{i:05d}", "note": "x" * 40} for i in range(2000)]
    execution = helpers.start(workspace, "noop", {"entries": entries, "batch": "2026-01"})
    preview = selectors.payloads.preview(execution.pk, "input")
    assert preview.size_bytes > selectors.payloads.PREVIEW_BYTES and preview.outline and not preview.truncated
    assert '"entries": [{"id": "entry-00000"' in preview.text and "… 2,000 items]" in preview.text
    assert '"batch": "2026-01"' in preview.text
    small = helpers.start(workspace, "noop", {"who": "ops"})
    assert selectors.payloads.preview(small.pk, "input").text == '{\n  "who": "ops"\n}'


def test_a_large_payload_is_outlined_once_per_stored_version(workspace):
    """Outlining reads the whole value (1,000,000 items: ~0.5 s a view), so it is computed once
    per row version of the payload; a rewritten payload (an edited retry) is outlined again."""
    from executions.core import payloads

    helpers.publish(workspace, "noop", helpers.NOOP)
    entries = [{"id": f"entry-{i:05d}", "note": "x" * 40} for i in range(2000)]
    execution = helpers.start(workspace, "noop", {"entries": entries})

    def outline_reads() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as captured:
            text = selectors.payloads.preview(execution.pk, "input").text
        return text, sum("jsonb_each" in q["sql"] for q in captured.captured_queries)

    first, reads = outline_reads()
    assert reads == 1 and "… 2,000 items]" in first
    assert outline_reads() == (first, 0), "the second view reuses the outline"
    assert selectors.payloads.inline(execution.pk, "input").preview == first
    with connection.cursor() as cursor:  # rewritten, as an edited retry does
        payloads.put_many(cursor, [(execution.pk, payloads.INPUT,
                                    payloads.encode({"entries": entries[:1500], "note": "edited"}))])
    again, reads = outline_reads()
    assert reads == 1 and "… 1,500 items]" in again and '"note": "edited"' in again


def test_a_fanout_offers_download_links_for_all_and_failed_children(viewer, failed_fanout, workspace):
    html = viewer.get(detail(failed_fanout)).content.decode()
    api = f"/api/v1/executions/{failed_fanout.pk}/children"
    for href in (f"{api}.csv", f"{api}.jsonl", f"{api}.csv?status=FAILED", f"{api}.jsonl?status=FAILED"):
        assert f'href="{href}"' in html
    helpers.publish(workspace, "plain", helpers.NOOP)
    plain = helpers.start(workspace, "plain", {})
    assert "children-downloads" not in viewer.get(detail(plain)).content.decode()  # no fan-out, no links
