"""Schedules in the Django admin: authors create, pause and delete them through the service
(audited); viewers only read; bad values show the service's message on their field."""

from __future__ import annotations

from typing import Any

import pytest

from executions.models import Schedule
from tests.support import helpers
from tests.support.claims import last_audit, publish_system
from tests.support.clients import staff
from workflows.models import AuditEvent, WorkflowDefinition

pytestmark = pytest.mark.django_db

SCHEDULES = "/admin/executions/schedule/"


def form(workspace: Any, workflow: str, **fields: Any) -> dict[str, Any]:
    definition = WorkflowDefinition.objects.get(workspace=workspace, key=workflow)
    return {"workspace": workspace.pk, "name": "nightly", "workflow": definition.pk, "cron": "0 2 * * *",
            "timezone": "UTC", "input": '{"a": 1}', "catch_up": "on", "enabled": "on", **fields}


def test_an_author_creates_pauses_and_deletes_a_schedule(workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    client = staff(workspace, "author", "ann")
    response = client.post(f"{SCHEDULES}add/", form(workspace, "hello"))
    assert response.status_code == 302, response.content.decode()[:3000]
    schedule = Schedule.objects.get()
    assert schedule.input == {"a": 1} and schedule.catch_up and schedule.next_run_at is not None
    assert schedule.created_by == "user:ann" and last_audit("schedule.create").outcome == AuditEvent.Outcome.ACCEPTED
    assert "nightly" in client.get(SCHEDULES).content.decode()

    paused = form(workspace, "hello")
    del paused["enabled"]
    assert client.post(f"{SCHEDULES}{schedule.pk}/change/", paused).status_code == 302
    schedule.refresh_from_db()
    assert not schedule.enabled and schedule.next_run_at is None

    assert client.post(f"{SCHEDULES}{schedule.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Schedule.objects.exists() and last_audit("schedule.delete").outcome == AuditEvent.Outcome.ACCEPTED


@pytest.mark.parametrize(("fields", "message"), [
    ({"cron": "99 * * * *"}, "is not a valid cron expression"),
    ({"timezone": "Moon/Base"}, "is not a known time zone"),
    ({"input": "{not json"}, "Not JSON"),
])
def test_bad_values_show_the_services_message(workspace: Any, fields: dict[str, Any], message: str) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    response = staff(workspace, "author", "ann").post(f"{SCHEDULES}add/", form(workspace, "hello", **fields))
    assert response.status_code == 200 and message in response.content.decode()
    assert not Schedule.objects.exists()


def test_a_reserved_workflow_cannot_be_scheduled_here(workspace: Any) -> None:
    publish_system(workspace, "system.nightly", helpers.NOOP)
    response = staff(workspace, "admin", "root", superuser=True).post(
        f"{SCHEDULES}add/", form(workspace, "system.nightly"))
    assert response.status_code == 200 and "reserved for system actors" in response.content.decode()
    assert not Schedule.objects.exists()


def test_viewers_read_but_cannot_add(workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    staff(workspace, "author", "ann").post(f"{SCHEDULES}add/", form(workspace, "hello"))
    viewer = staff(workspace, "viewer", "vic")
    assert "nightly" in viewer.get(SCHEDULES).content.decode()
    assert viewer.get(f"{SCHEDULES}add/").status_code == 403
    assert viewer.post(f"{SCHEDULES}add/", form(workspace, "hello", name="other")).status_code == 403
    assert Schedule.objects.count() == 1


def test_the_add_form_shows_only_what_an_author_fills_in(workspace: Any) -> None:
    """Created at / Updated at and the fire bookkeeping have no value before the row exists:
    the add form showed Django's placeholder object for them."""
    helpers.publish(workspace, "hello", helpers.NOOP)
    page = staff(workspace, "author", "ann").get(f"{SCHEDULES}add/").content.decode()
    assert "DatabaseDefault" not in page and "object at 0x" not in page
    assert 'name="cron"' in page and "Created at" not in page and "Next run at" not in page
