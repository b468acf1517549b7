"""The Schedules page: the workspace's schedules with next and last runs (a link to the last
execution), only the workspace's own, and a login required."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from executions.models import Execution, Schedule
from executions.services import schedules
from tests.support import helpers
from tests.support.clients import text

pytestmark = pytest.mark.django_db


def test_lists_schedules_with_next_and_last_runs(viewer: Client, workspace: Any, other_workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedules.create_schedule(workspace, name="nightly", workflow="hello", cron="0 2 * * *", timezone="Europe/Berlin")
    paused = schedules.create_schedule(workspace, name="paused-one", workflow="hello", cron="*/5 * * * *")
    schedules.update_schedule(paused, enabled=False)
    helpers.publish(other_workspace, "hello", helpers.NOOP)
    schedules.create_schedule(other_workspace, name="theirs", workflow="hello", cron="* * * * *")
    nightly = Schedule.objects.get(name="nightly")
    schedules.fire_due(now=nightly.next_run_at)
    execution = Execution.objects.get(workspace=workspace)

    page = text(viewer.get("/schedules/"))
    assert "nightly" in page and "paused-one" in page and "theirs" not in page
    assert "0 2 * * *" in page and "Europe/Berlin" in page and "paused" in page
    assert f"/executions/{execution.pk}/" in page
    nightly.refresh_from_db()
    assert nightly.next_run_at.strftime("%Y-%m-%d %H:%M") in page
    rows = text(viewer.get("/schedules/rows"))
    assert "nightly" in rows and "<html" not in rows


def test_an_empty_workspace_says_so(viewer: Client) -> None:
    assert "No schedules yet" in text(viewer.get("/schedules/"))


def test_the_page_needs_a_login() -> None:
    response = Client().get("/schedules/")
    assert response.status_code == 302 and "login" in response["Location"]
