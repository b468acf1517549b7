"""The API's execution list filters executions with a step waiting for a callback, an event or
either (issue 32 §3: ``GET /api/v1/executions?waiting=…``, as the UI's list does)."""

from __future__ import annotations

import pytest

from tests.support import helpers
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

APPROVAL = {"start": "w", "vertices": {"w": {"type": "WAIT", "for": "callback", "timeoutSeconds": 600}}}
DEPLOY = {"start": "w", "vertices": {"w": {"type": "WAIT", "for": "event", "event": "deploy.ready",
                                           "timeoutSeconds": 600}}}


def test_the_api_lists_executions_waiting_for_callbacks_or_events(workspace):
    helpers.publish(workspace, "approval", APPROVAL)
    helpers.publish(workspace, "deploy", DEPLOY)
    helpers.publish(workspace, "noop", helpers.NOOP)
    approval = helpers.start(workspace, "approval", {})
    deploy = helpers.start(workspace, "deploy", {})
    done = helpers.start(workspace, "noop", {})
    helpers.run_engine()
    client = api(workspace, "viewer")

    def listed(query: str) -> set[str]:
        return {row["id"] for row in ok(client.get(f"/api/v1/executions?{query}"))["results"]}

    assert listed("waiting=callback") == {str(approval.pk)}
    assert listed("waiting=event") == {str(deploy.pk)}
    assert listed("waiting=any") == {str(approval.pk), str(deploy.pk)}
    assert listed("") == {str(approval.pk), str(deploy.pk), str(done.pk)}
    assert "waiting" in str(problem(client.get("/api/v1/executions?waiting=sometimes"), 400))
