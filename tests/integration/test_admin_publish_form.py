"""Issue 33 §1: the admin's publish form starts from the current version's DSL and reports
every problem of a refused document, as the API does."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from tests.support import helpers
from tests.support.admin import DEFINITIONS, add_definition
from tests.support.clients import api, staff
from workflows.models import Role, WorkflowDefinition

pytestmark = pytest.mark.django_db

BAD = {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "no.such.handler", "next": "b"},
                                  "b": {"type": "TASK", "handler": "demo.echo", "retry": {"maxAttempts": 0}},
                                  "c": {"type": "HTTP"}}}


def test_the_form_reports_every_problem_the_api_reports(workspace: Any) -> None:
    body = api(workspace, "author").post("/api/v1/workflows/broken/versions", BAD, format="json")
    assert body.status_code == 400
    expected = [(e["path"], e["message"]) for e in body.json()["errors"]]
    assert len(expected) >= 3, expected
    page = add_definition(staff(workspace, Role.AUTHOR, "writer"), workspace, "broken", BAD).content.decode()
    for path, message in expected:
        assert f"{path}: {message}".replace("'", "&#x27;") in page, (path, message)


def test_the_form_starts_from_the_current_dsl(workspace: Any) -> None:
    version = helpers.publish(workspace, "flow", helpers.NOOP)
    definition = WorkflowDefinition.objects.get(workspace=workspace, key="flow")
    page = staff(workspace, Role.AUTHOR, "writer").get(f"{DEFINITIONS}{definition.pk}/change/").content.decode()
    textarea = page[page.index('name="dsl"'):]
    textarea = textarea[textarea.index(">") + 1:textarea.index("</textarea>")]
    assert json.loads(html.unescape(textarea)) == json.loads(version.canonical)
