"""Issue 31 §4: tags on a start (API, service, command), inherited by spawned and chained
descendants; a SPAWNER's itemKey stored on each child (bad keys are FAILED children); and
every search filter of the execution list and the children list, with their 400s."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from executions.models import Execution
from tests.support import helpers
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}}
TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 1}}


def keyed_doc(item_key: str = "$.item.id", **spawner: Any) -> dict[str, Any]:
    doc = helpers.fanout_doc("child", merge_config=TOLERANT)
    doc["vertices"]["fan"].update({"itemKey": item_key, **spawner})
    return doc


def children(parent: Execution) -> list[Execution]:
    return list(Execution.objects.filter(parent=parent).order_by("item_index"))


# --- tags ----------------------------------------------------------------------------------------

def test_tags_on_a_start_are_shown_and_inherited_by_children_and_chained_executions(workspace):
    helpers.publish(workspace, "child", ECHO)
    doc = keyed_doc()
    doc["vertices"]["done"] = {"type": "CHAIN", "workflow": "next"}
    helpers.publish(workspace, "next", ECHO)
    helpers.publish(workspace, "parent", doc)
    client = api(workspace, "operator")
    body = ok(client.post("/api/v1/executions", {"workflow": "parent", "input": {"items": [{"id": "a"}, {"id": "b"}]},
                                                 "tags": {"customer": "acme", "region": "eu"}}, format="json"), 201)
    assert body["tags"] == {"customer": "acme", "region": "eu"}
    helpers.run_engine()
    parent = Execution.objects.get(pk=body["id"])
    assert parent.status == "SUCCEEDED"
    kids = children(parent)
    assert [k.tags for k in kids] == [{"customer": "acme", "region": "eu"}] * 2
    chained = Execution.objects.get(chained_from=parent)
    assert chained.tags == {"customer": "acme", "region": "eu"}
    detail = ok(client.get(f"/api/v1/executions/{kids[0].pk}"))
    assert detail["tags"] == {"customer": "acme", "region": "eu"} and detail["item_key"] == "a"
    untagged = helpers.start(workspace, "next", {})
    assert ok(client.get(f"/api/v1/executions/{untagged.pk}"))["tags"] == {}


@pytest.mark.parametrize(("tags", "field"), [
    ({f"k{i}": "v" for i in range(21)}, "tags"),
    ({"Customer": "acme"}, "tags.Customer"),
    ({"k" * 65: "v"}, "tags." + "k" * 65),
    ({"customer": 7}, "tags.customer"),
    ({"customer": "x" * 257}, "tags.customer"),
    (["customer:acme"], "tags"),
    ("customer=acme", "tags"),
])
def test_bad_tags_are_a_400_naming_the_field_and_start_nothing(workspace, tags, field):
    helpers.publish(workspace, "flow", helpers.NOOP)
    body = problem(api(workspace, "operator").post("/api/v1/executions", {"workflow": "flow", "tags": tags},
                                                   format="json"), 400)
    assert field in [e.get("field") for e in body["errors"]], body
    assert not Execution.objects.exists()


def test_tags_are_part_of_the_idempotent_request(workspace):
    helpers.publish(workspace, "flow", helpers.NOOP)
    client = api(workspace, "operator")
    first = {"workflow": "flow", "tags": {"customer": "acme"}}
    created = ok(client.post("/api/v1/executions", first, format="json", HTTP_IDEMPOTENCY_KEY="k1"), 201)
    again = ok(client.post("/api/v1/executions", first, format="json", HTTP_IDEMPOTENCY_KEY="k1"), 200)
    assert again["id"] == created["id"]
    problem(client.post("/api/v1/executions", {**first, "tags": {"customer": "zeta"}}, format="json",
                        HTTP_IDEMPOTENCY_KEY="k1"), 409)


def test_sb_run_takes_tags(workspace):
    helpers.publish(workspace, "flow", helpers.NOOP)
    out = StringIO()
    call_command("sb_run", "flow", "--tag", "customer=acme", "--tag", "region=eu", stdout=out, stderr=StringIO())
    started = Execution.objects.get(pk=out.getvalue().strip())
    assert started.tags == {"customer": "acme", "region": "eu"}
    with pytest.raises(CommandError, match="a tag key is"):
        call_command("sb_run", "flow", "--tag", "Bad=x", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="key=value"):
        call_command("sb_run", "flow", "--tag", "novalue", stdout=StringIO(), stderr=StringIO())


def test_the_list_finds_executions_having_every_tag(workspace, other_workspace):
    helpers.publish(workspace, "flow", helpers.NOOP)
    helpers.publish(other_workspace, "flow", helpers.NOOP)
    both = helpers.start(workspace, "flow", {}, tags={"customer": "acme", "region": "eu"})
    acme_us = helpers.start(workspace, "flow", {}, tags={"customer": "acme", "region": "us"})
    helpers.start(workspace, "flow", {})
    helpers.start(other_workspace, "flow", {}, tags={"customer": "acme", "region": "eu"})
    client = api(workspace, "viewer")

    def ids(query: str) -> set[str]:
        return {row["id"] for row in ok(client.get(f"/api/v1/executions?{query}"))["results"]}

    assert ids("tag=customer:acme&tag=region:eu") == {str(both.pk)}
    assert ids("tag=customer:acme") == {str(acme_us.pk), str(both.pk)}
    assert ids("tag=region:us&status=PENDING") == {str(acme_us.pk)}
    assert ids("tag=customer:zeta") == set()
    assert ids("tag=region:eu&tag=region:us") == set(), "one value per key: nothing has both"
    assert len(ids("limit=10")) == 3


@pytest.mark.parametrize("query", ["tag=acme", "tag=Bad:x",
                                   "tag=k:" + "x" * 257, "&".join(f"tag=k{i}:v" for i in range(21))])
def test_a_bad_tag_term_is_a_400_naming_it(workspace, query):
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions?{query}"), 400)
    assert [e for e in body["errors"] if e.get("field", "").split(".")[0] == "tag"], body


# --- itemKey -------------------------------------------------------------------------------------

def test_each_child_stores_its_item_key(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", keyed_doc())
    parent = helpers.start(workspace, "parent", {"items": [{"id": "e-1"}, {"id": 48213}, {"id": True}]})
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert [(k.item_key, k.status) for k in children(parent)] == [
        ("e-1", "SUCCEEDED"), ("48213", "SUCCEEDED"), ("true", "SUCCEEDED")]


def test_item_key_with_an_item_input_template_and_the_whole_item(workspace):
    helpers.publish(workspace, "child", ECHO)
    helpers.publish(workspace, "parent", keyed_doc(itemInput={"ref": "$.item.ref"}, item_key="$.item.ref"))
    parent = helpers.start(workspace, "parent", {"items": [{"ref": "r1"}, {"ref": "r2"}]})
    helpers.publish(workspace, "whole", keyed_doc(item_key="$.item"))
    whole = helpers.start(workspace, "whole", {"items": ["x-1", 2]})
    helpers.run_engine()
    assert [k.item_key for k in children(parent)] == ["r1", "r2"]
    assert [k.item_key for k in children(whole)] == ["x-1", "2"]


@pytest.mark.parametrize("item_input", [None, {"ref": "$.item"}])
def test_an_item_without_a_usable_key_is_a_failed_child(workspace, item_input):
    helpers.publish(workspace, "child", ECHO)
    spawner = {"itemInput": item_input} if item_input else {}
    helpers.publish(workspace, "parent", keyed_doc(**spawner))
    items = [{"id": "ok"}, {}, {"id": None}, {"id": {"a": 1}}, {"id": [1]}, {"id": "x" * 257}, {"id": "y" * 256}]
    parent = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine()
    kids = children(parent)
    assert [k.status for k in kids] == ["SUCCEEDED", "FAILED", "FAILED", "FAILED", "FAILED", "FAILED", "SUCCEEDED"]
    assert [k.item_key for k in kids] == ["ok", None, None, None, None, None, "y" * 256]
    assert "item key $.item.id" in kids[1].error and "nothing there" in kids[1].error and "item 1" in kids[1].error
    assert "is null" in kids[2].error
    assert "JSON object" in kids[3].error and "JSON array" in kids[4].error
    assert "257 characters" in kids[5].error
    assert all(not k.steps.exists() for k in kids[1:6]), "a child without a key runs nothing"
    assert helpers.refresh(parent).status == "SUCCEEDED", "tolerated like any bad item"


def test_publishing_a_bad_item_key_is_a_400_with_its_json_path(workspace):
    doc = keyed_doc(item_key="$.input.id")
    body = problem(api(workspace, "admin").post("/api/v1/workflows/parent/versions", doc, format="json"),
                   400)
    assert "$.vertices.fan.itemKey" in str(body), body


# --- children search -----------------------------------------------------------------------------

@pytest.fixture
def searched(workspace) -> Execution:
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    helpers.publish(workspace, "parent", keyed_doc())
    items = [{"id": f"e-{i}", "fail": i % 3 == 0, "i": i} for i in range(9)]
    parent = helpers.start(workspace, "parent", {"items": items})
    helpers.run_engine()
    return helpers.refresh(parent)


def child_keys(workspace, parent: Execution, query: str) -> list[str]:
    body = ok(api(workspace, "viewer").get(f"/api/v1/executions/{parent.pk}/children?{query}"))
    return [row["item_key"] for row in body["results"]]


def test_children_by_item_key_and_keys(workspace, searched):
    assert child_keys(workspace, searched, "item_key=e-4") == ["e-4"]
    assert child_keys(workspace, searched, "item_key=e-404") == []
    assert child_keys(workspace, searched, "item_key__in=e-7,e-2,e-404") == ["e-2", "e-7"]
    assert child_keys(workspace, searched, "item_key__in=e-7,e-2&item_key=e-2") == ["e-2"]
    assert child_keys(workspace, searched, "item_key__in=e-7,e-2&status=FAILED") == []
    assert child_keys(workspace, searched, "item_key__in=e-3,e-4&status=FAILED") == ["e-3"]


def test_children_by_error_text_and_status(workspace, searched):
    failed = child_keys(workspace, searched, "status=FAILED")
    assert failed == ["e-0", "e-3", "e-6"]
    error = Execution.objects.get(parent=searched, item_key="e-3").error
    assert error, "the failing handler leaves an error"
    word = error.split()[0]
    assert child_keys(workspace, searched, f"error_contains={word.upper()}") == failed
    assert child_keys(workspace, searched, f"error_contains={word}&item_key=e-6") == ["e-6"]
    assert child_keys(workspace, searched, "error_contains=no-such-text-anywhere") == []
    assert len(child_keys(workspace, searched, "limit=2")) == 2


@pytest.mark.parametrize(("query", "field"), [
    ("item_key=" + "k" * 257, "item_key"),
    ("item_key__in=" + ",".join(f"k{i}" for i in range(101)), "item_key__in"),
    ("item_key__in=a," + "k" * 257, "item_key__in"),
    ("error_contains=" + "e" * 501, "error_contains"),
    ("status=BROKEN", "status"),
    ("item_key=a&item_key=b", "item_key"),
])
def test_bad_children_filters_are_a_400_naming_them(workspace, searched, query, field):
    body = problem(api(workspace, "viewer").get(f"/api/v1/executions/{searched.pk}/children?{query}"), 400)
    assert field in [e.get("field") for e in body["errors"]], body


# --- the UI's forms ------------------------------------------------------------------------------

def test_ui_searches_and_their_400s(workspace, searched, operator):
    children_url = f"/executions/{searched.pk}/fanouts/fan/children"
    found = operator.get(f"{children_url}?key=e-4,e-7", HTTP_HX_REQUEST="true")
    assert found.status_code in (200, 286)  # 286: htmx's "stop polling" (the parent has finished)
    html = found.content.decode()
    assert 'data-item-key="e-4"' in html and 'data-item-key="e-7"' in html and 'data-item-key="e-5"' not in html
    by_error = operator.get(f"{children_url}?error=FAILED+ON+PURPOSE&status=FAILED", HTTP_HX_REQUEST="true")
    assert by_error.content.decode().count('data-status="FAILED"') == 3
    too_many = operator.get(f"{children_url}?key=" + "+".join(f"k{i}" for i in range(101)), HTTP_HX_REQUEST="true")
    assert too_many.status_code == 400 and "at most 100 item keys" in too_many.content.decode()
    listed = operator.get("/executions/?tag=customer")
    assert listed.status_code == 400 and "not key:value" in listed.content.decode()
    unclosed = operator.get('/executions/?tag=customer:"acme')
    assert unclosed.status_code == 400 and "quote" in unclosed.content.decode()


def test_the_start_form_takes_tags(workspace, operator):
    helpers.publish(workspace, "flow", helpers.NOOP)
    started = operator.post("/workflows/flow/start", {"input": "{}", "tags": 'customer=acme region="eu west"'})
    assert started.status_code == 303, started.content
    assert Execution.objects.get().tags == {"customer": "acme", "region": "eu west"}
    refused = operator.post("/workflows/flow/start", {"input": "{}", "tags": "Customer=acme"})
    assert refused.status_code == 400 and "a tag key is" in refused.content.decode()
    assert Execution.objects.count() == 1
