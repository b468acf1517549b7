"""The workflow authors' admin (issue 2): definitions listed with their current hash, a new
version published from a JSON textarea with errors shown inline at their JSON paths, and
read-only versions showing the hash, the canonical DSL and a diff against the previous one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import helpers
from tests.support.admin import DEFINITIONS, add_definition
from tests.support.clients import staff
from workflows.models import Role, WorkflowDefinition

pytestmark = pytest.mark.django_db

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo"}}}


def test_publishing_from_the_admin_lists_the_definition_with_its_current_hash(workspace: Any) -> None:
    author = staff(workspace, Role.AUTHOR, "writer")
    response = add_definition(author, workspace, "ledger", helpers.NOOP)
    assert response.status_code == 302, response.content.decode()[:2000]
    definition = WorkflowDefinition.objects.get(workspace=workspace, key="ledger")
    listing = author.get(DEFINITIONS, {"q": "ledger"}).content.decode()
    assert "ledger" in listing and definition.current_version.hash[:12] in listing


def test_dsl_errors_show_inline_with_their_json_paths_and_nothing_is_written(workspace: Any) -> None:
    author = staff(workspace, Role.AUTHOR, "writer")
    bad = {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "demo.echo", "next": "zzz"},
                                      "b": {"type": "NOPE"}}}
    page = add_definition(author, workspace, "broken", bad).content.decode()
    assert "$.vertices.a.next: names no vertex: &#x27;zzz&#x27;" in page
    assert "$.vertices.b.type: unknown vertex type" in page
    not_json = author.post(f"{DEFINITIONS}add/", {"workspace": workspace.pk, "key": "broken", "dsl": "{oops",
                                                 "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"})
    assert "Not JSON" in not_json.content.decode()
    assert not WorkflowDefinition.objects.filter(key="broken").exists()


def test_a_version_page_shows_its_hash_canonical_dsl_and_diff(workspace: Any) -> None:
    first = helpers.publish(workspace, "flow", helpers.NOOP)
    second = helpers.publish(workspace, "flow", ECHO)
    author = staff(workspace, Role.AUTHOR, "writer")
    page = author.get(f"/admin/workflows/workflowversion/{second.pk}/change/").content.decode()
    assert second.hash in page
    assert "&quot;handler&quot;: &quot;demo.echo&quot;" in page, "the canonical DSL, pretty-printed"
    assert "-      &quot;handler&quot;: &quot;demo.noop&quot;," in page and first.hash[:12] in page, "the diff"
    first_page = author.get(f"/admin/workflows/workflowversion/{first.pk}/change/").content.decode()
    assert "(first version)" in first_page
    assert author.post(f"/admin/workflows/workflowversion/{second.pk}/change/", {"author": "x"}).status_code == 403
    second.refresh_from_db()
    assert second.author == "test"
    assert json.loads(second.canonical)["vertices"]["t"]["handler"] == "demo.echo"
