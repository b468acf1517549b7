"""Items from files (issue 16, part 4): POST /api/v1/uploads streams JSON Lines or CSV into
the database; a start names the upload with ``{"$upload": id}`` and the spawner reads the
list as if it had come inline; sb_run does the same with --items-file."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from executions.core import payloads
from executions.models import Execution, Upload, UploadItem
from executions.selectors import payloads as payload_reads
from executions.services import uploads
from tests.support import helpers
from tests.support.clients import api, ok, problem
from tests.support.factories import member
from tests.support.threads import race
from workflows.errors import Conflict
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db

JSONL = "application/x-ndjson"
CSV = "text/csv"


def post(client: Any, body: bytes | str, content_type: str = JSONL, **extra: Any) -> Any:
    data = body.encode() if isinstance(body, str) else body
    return client.generic("POST", "/api/v1/uploads", data, content_type=content_type, **extra)


def usage() -> int:
    with connection.cursor() as cursor:
        return payloads.pressure(cursor).used_bytes


def test_a_jsonl_upload_feeds_a_fan_out_without_passing_through_the_request(workspace: Any) -> None:
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.entries"))
    client = api(workspace, "operator")
    lines = "".join(json.dumps({"i": i, "fail": i == 2}) + "\n" for i in range(5)) + "\n"
    before = usage()
    created = ok(post(client, lines), 201)
    assert set(created) == {"id", "items", "bytes", "format"}
    assert created["items"] == 5 and created["bytes"] == len(lines.encode()) and created["format"] == "jsonl"
    assert usage() > before  # the items count towards the payload store

    started = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {
        "entries": {"$upload": created["id"]}, "note": "kept"}}, format="json"), 201)
    execution = Execution.objects.get(pk=started["id"])
    stored = payload_reads.input_of(execution)
    assert stored == {"note": "kept", "entries": [{"i": i, "fail": i == 2} for i in range(5)]}
    with connection.cursor() as cursor:  # the store counts the filled input, not the marker
        cursor.execute("SELECT size_bytes, octet_length(data::text) FROM executions_payload "
                       "WHERE execution_id = %s AND name = 'input'", [execution.pk])
        size, actual = cursor.fetchone()
    assert size == actual > len(lines)
    helpers.run_engine()
    assert helpers.child_counts(execution) == {"SUCCEEDED": 4, "FAILED": 1}
    failed = Execution.objects.get(parent=execution, status="FAILED")
    assert failed.item_index == 2
    actions = list(AuditEvent.objects.filter(outcome="accepted").values_list("action", "detail"))
    assert ("upload.create", {"format": "jsonl", "id": created["id"], "items": 5, "bytes": len(lines)}) in actions


def test_csv_rows_become_objects_of_strings_in_file_order(workspace: Any) -> None:
    client = api(workspace, "operator")
    body = 'id,name\r\n1,"Ada, Countess"\r\n2,"two\nlines"\r\n3,\r\n'
    created = ok(post(client, body, "text/csv; charset=utf-8"), 201)
    assert created["format"] == "csv" and created["items"] == 3
    items = list(UploadItem.objects.filter(upload_id=created["id"]).order_by("index").values_list("data", flat=True))
    assert items == [{"id": "1", "name": "Ada, Countess"}, {"id": "2", "name": "two\nlines"},
                     {"id": "3", "name": ""}]


@pytest.mark.parametrize(("body", "content_type", "line", "says"), [
    ('{"a": 1}\n{"a": 2\n{"a": 3}\n', JSONL, 2, "not JSON"),
    ('{"a": 1}\n\n{"a": NaN}\n', JSONL, 3, "NaN is not valid JSON"),
    ('{"a": "\\u0000"}\n', JSONL, 1, "NUL"),
    (b'{"a": 1}\n{"a": "\xff"}\n', JSONL, 2, "not UTF-8"),
    ("id,name\n1,a\n2,b,c\n", CSV, 3, "3 fields, but the header has 2"),
    ('id,name\n1,"x\ny"\n2\n', CSV, 4, "1 fields"),
    ("id,id\n1,2\n", CSV, 1, "repeats 'id'"),
    ("", CSV, 1, "no header row"),
])
def test_a_bad_line_is_a_400_with_its_number_and_nothing_is_stored(workspace: Any, body: Any, content_type: str,
                                                                   line: int, says: str) -> None:
    client = api(workspace, "operator")
    before = usage()
    found = problem(post(client, body, content_type), 400)
    assert found["detail"].startswith(f"line {line}: "), found
    assert says in found["detail"]
    assert not Upload.objects.exists() and not UploadItem.objects.exists()
    assert usage() == before
    assert AuditEvent.objects.filter(action="upload.create", outcome="refused").count() == 1


def test_a_spreadsheets_csv_with_a_byte_order_mark_keys_its_first_column_plainly(workspace: Any) -> None:
    """Excel's "CSV UTF-8" starts with a BOM, which keyed every item's first column '\ufeffid'."""
    client = api(workspace, "operator")
    created = ok(post(client, b"\xef\xbb\xbfid,name\r\n1,a\r\n", CSV), 201)
    assert list(UploadItem.objects.filter(upload_id=created["id"]).values_list("data", flat=True)) == [
        {"id": "1", "name": "a"}]
    jsonl = ok(post(client, b"\xef\xbb\xbf" + b'{"id": 1}\n'), 201)
    assert list(UploadItem.objects.filter(upload_id=jsonl["id"]).values_list("data", flat=True)) == [{"id": 1}]


@pytest.mark.parametrize(("body", "content_type", "line", "says"), [
    ('{"a": 1}\n' + "[" + "{}," * 400_000 + "{}]\n", JSONL, 2, "longer than 1,048,576 bytes"),
    ('{"a": 1}\n{"a": 2}\n' + "[" * 110 + "]" * 110 + "\n", JSONL, 3, "nested more than 100 levels deep"),
    ("a,b,c,d,e,f,g,h,i,j\n1,2,3,4,5,6,7,8,9,10\n" + ",".join(['"' + "x\n" * 60_000 + '"'] * 10) + "\n", CSV, 3,
     "a record longer than 1,048,576 bytes"),
    ("id,name\n1," + '"' + "x\n" * 70_000 + '"\n', CSV, 2, "field larger than field limit"),
    (",".join(f"c{n}" for n in range(1001)) + "\n", CSV, 1, "the header has 1,001 columns; at most 1,000"),
])
def test_an_item_too_long_too_deep_or_too_wide_is_a_400_naming_its_line(workspace: Any, body: str, content_type: str,
                                                                         line: int, says: str) -> None:
    found = problem(post(api(workspace, "operator"), body, content_type), 400)
    assert found["detail"].startswith(f"line {line}: ") and says in found["detail"], found["detail"][:300]
    assert not Upload.objects.exists() and not UploadItem.objects.exists()


def test_a_wide_header_within_the_column_cap_is_read_and_a_repeated_name_is_named(workspace: Any,
                                                                                   settings: Any) -> None:
    settings.SB = {**settings.SB, "UPLOAD_MAX_COLUMNS": 40_000}
    header = ",".join(f"column-{n}" for n in range(30_000))
    received = uploads.receive(workspace.pk, io.BytesIO(f"{header}\n".encode()).read, format="csv")
    assert received.items == 0
    repeated = header + ",column-7"
    with pytest.raises(uploads.BadLine, match="repeats 'column-7'"):
        uploads.receive(workspace.pk, io.BytesIO(f"{repeated}\n".encode()).read, format="csv")


@pytest.mark.parametrize(("path", "content_type"), [
    ("/api/v1/uploads", JSONL), ("/api/v1/executions", "application/json"),
    ("/api/v1/destinations", "application/json")])
def test_a_chunked_body_is_a_411_never_an_empty_body(workspace: Any, path: str, content_type: str) -> None:
    """Django reads a body by its Content-Length: a chunked upload was stored as 0 items (201)."""
    helpers.publish(workspace, "flow", helpers.NOOP)
    response = api(workspace, "admin").generic("POST", path, b'{"workflow": "flow"}\n', content_type=content_type,
                                               HTTP_TRANSFER_ENCODING="chunked")
    refused = problem(response, 411)
    assert "Content-Length" in refused["detail"] and refused["code"] == "length-required"
    assert not Upload.objects.exists() and not Execution.objects.exists()


def test_limits_roles_and_media_types(workspace: Any, settings: Any) -> None:
    settings.SB = {**settings.SB, "UPLOAD_MAX_BYTES": 100}
    operator = api(workspace, "operator")
    big = "".join(json.dumps({"i": i}) + "\n" for i in range(20))
    assert "larger than 100 bytes" in problem(post(operator, big), 413)["detail"]
    # A body with no Content-Length (chunked): refused while reading, nothing kept.
    with pytest.raises(uploads.UploadTooLarge):
        uploads.receive(workspace.pk, io.BytesIO(big.encode()).read, format="jsonl")
    assert not Upload.objects.exists() and not UploadItem.objects.exists()
    viewer = api(workspace, "viewer")
    assert problem(post(viewer, '{"a": 1}\n', CONTENT_LENGTH=str(10**12)), 403)  # the role before the size
    assert problem(post(operator, "[1]", "application/json"), 415)
    assert ok(post(operator, "1\n2\n"), 201)["items"] == 2


def test_a_start_naming_a_missing_or_foreign_upload_is_refused_whole(workspace: Any, other_workspace: Any) -> None:
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.entries"))
    foreign = ok(post(api(other_workspace, "operator"), "1\n"), 201)["id"]
    client = api(workspace, "operator")
    for upload in (foreign, "7f2a3c9e-0000-4000-8000-000000000000"):
        body = {"workflow": "parent", "input": {"entries": {"$upload": upload}}}
        assert f"no upload {upload}" in problem(client.post("/api/v1/executions", body, format="json"), 404)["detail"]
    bad = problem(client.post("/api/v1/executions", {"workflow": "parent", "input": {
        "entries": {"$upload": "nope"}}}, format="json"), 400)
    assert bad["errors"] == [{"path": "$.input.entries",
                              "message": 'an upload is named as {"$upload": "<upload id>"} and nothing else'}]
    assert not Execution.objects.exists()


def test_an_idempotent_repeat_returns_the_same_execution(workspace: Any) -> None:
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.entries"))
    client = api(workspace, "operator")
    upload = ok(post(client, "1\n2\n"), 201)["id"]
    body = {"workflow": "parent", "input": {"entries": {"$upload": upload}}}
    first = ok(client.post("/api/v1/executions", body, format="json", HTTP_IDEMPOTENCY_KEY="k1"), 201)
    again = ok(client.post("/api/v1/executions", body, format="json", HTTP_IDEMPOTENCY_KEY="k1"), 200)
    assert first["id"] == again["id"]


def test_uploads_expire_after_the_retention_period_with_their_bytes(workspace: Any) -> None:
    client = api(workspace, "operator")
    created = ok(post(client, "1\n2\n3\n"), 201)["id"]
    before = usage()
    with transaction.atomic(), connection.cursor() as cursor:
        assert uploads.apply_retention(cursor, age_seconds=3600) == 0
        # The test runs in one transaction, so now() is the upload's creation time: -1 s is "all".
        assert uploads.apply_retention(cursor, age_seconds=-1) == 1
    assert not Upload.objects.filter(pk=created).exists() and not UploadItem.objects.exists()
    assert usage() < before  # its bytes left the payload store


def test_sb_run_items_file(workspace: Any, tmp_path: Any) -> None:
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc(items="$.input.batch.entries"))
    path = tmp_path / "entries.csv"
    path.write_text("id,amount\n1,10\n2,20\n")
    out = io.StringIO()
    call_command("sb_run", "parent", "--items-file", str(path), "--items-at", "batch.entries",
                 "--input", '{"batch": {"label": "b"}}', stdout=out, stderr=io.StringIO())
    execution = Execution.objects.get(pk=out.getvalue().strip())
    assert payload_reads.input_of(execution) == {"batch": {"label": "b", "entries": [
        {"id": "1", "amount": "10"}, {"id": "2", "amount": "20"}]}}
    helpers.run_engine()
    assert helpers.child_counts(execution) == {"SUCCEEDED": 2}


def test_a_browser_session_uploads_with_its_csrf_token_and_a_viewer_is_refused_unread(workspace: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member(workspace, "operator", "oper"))
    browser.get("/workflows/")  # sets the CSRF cookie, as the console page does
    token = browser.cookies["csrftoken"].value
    assert problem(post(browser, "1\n"), 403)["detail"].startswith("CSRF")
    assert ok(post(browser, "1\n2\n", HTTP_X_CSRFTOKEN=token), 201)["items"] == 2
    viewer = Client(enforce_csrf_checks=True)
    viewer.force_login(member(workspace, "viewer", "view"))
    viewer.get("/workflows/")
    refused = post(viewer, '{"a": 1}\n', HTTP_X_CSRFTOKEN=viewer.cookies["csrftoken"].value,
                   CONTENT_LENGTH=str(10**12))
    assert problem(refused, 403)["code"] == "forbidden"


def test_uploads_count_against_the_workspaces_plan_and_the_refusal_gives_the_numbers(
        workspace: Any, other_workspace: Any) -> None:
    """Two uploads pushed a small store past 100% and another workspace's fan-out waited 24 h."""
    workspace.plan.upload_bytes = 100
    workspace.plan.save()
    client = api(workspace, "operator")
    first = ok(post(client, "".join(f"{i}\n" for i in range(30))), 201)  # 80 bytes
    assert first["bytes"] == 80
    refused = problem(post(client, '{"a": 1}\n{"a": 2}\n{"a": 3}\n'), 413)
    assert refused["code"] == "upload-quota-exceeded"
    assert "the 1 stored uploads (80 bytes) need more than 100 bytes" in refused["detail"]
    # A body with no declared size is refused while it is read, nothing kept.
    with pytest.raises(uploads.UploadQuotaExceeded):
        uploads.receive(workspace.pk, io.BytesIO(b"1\n" * 20).read, format="jsonl")
    assert Upload.objects.filter(workspace=workspace).count() == 1
    assert ok(post(api(other_workspace, "operator", name="other"), "1\n" * 40), 201)  # its own plan's quota
    assert ok(post(client, "1\n" * 10), 201)  # 20 bytes: fits exactly


def test_an_operator_deletes_an_upload_and_executions_started_from_it_keep_their_input(
        workspace: Any, other_workspace: Any) -> None:
    helpers.publish(workspace, "noop", helpers.NOOP)
    client = api(workspace, "operator")
    created = ok(post(client, '{"id": "e-1"}\n{"id": "e-2"}\n'), 201)
    started = ok(client.post("/api/v1/executions", {"workflow": "noop", "input": {"rows": {"$upload": created["id"]}}},
                             format="json"), 201)
    before = usage()
    assert problem(api(workspace, "viewer").delete(f"/api/v1/uploads/{created['id']}"), 403)
    assert problem(api(other_workspace, "admin", name="outsider").delete(f"/api/v1/uploads/{created['id']}"), 404)
    assert client.delete(f"/api/v1/uploads/{created['id']}").status_code == 204
    assert not Upload.objects.exists() and not UploadItem.objects.exists() and usage() < before
    assert payload_reads.input_of(Execution.objects.get(pk=started["id"])) == {"rows": [{"id": "e-1"}, {"id": "e-2"}]}
    assert problem(client.delete(f"/api/v1/uploads/{created['id']}"), 404)
    assert AuditEvent.objects.filter(action="upload.delete", outcome="accepted", target=created["id"]).count() == 1
    named = {"workflow": "noop", "input": {"rows": {"$upload": created["id"]}}}
    gone = problem(client.post("/api/v1/executions", named, format="json"), 404)
    assert created["id"] in gone["detail"]


@pytest.mark.django_db(transaction=True)
def test_an_upload_a_start_is_copying_cannot_be_deleted_under_it(workspace: Any) -> None:
    created = uploads.receive(workspace.pk, io.BytesIO(b"1\n2\n").read, format="jsonl")
    with transaction.atomic(), connection.cursor() as cursor:
        uploads.use(cursor, workspace.pk, [uploads.Placement(["rows"], created.id)])  # holds the row, as a start
        [outcome] = race(lambda: _delete_outcome(workspace.pk, created.id), timeout=30)
    assert outcome == "409" and Upload.objects.filter(pk=created.id).exists()


def _delete_outcome(workspace_id: int, upload_id: Any) -> str:
    try:
        uploads.delete(workspace_id, upload_id)
    except Conflict:
        return "409"
    return "deleted"
