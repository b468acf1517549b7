"""The demo of the second seed article's poller without the poll (issue 32): a deployment
that becomes ready after a while, awaited with an event — the waiting step holds no worker
and no timer, and the execution succeeds once the rollout announces itself."""

from __future__ import annotations

import pytest

from demo import workflows as demo_workflows
from executions.models import Step
from tests.support import helpers
from tests.support.clients import api, ok

pytestmark = pytest.mark.django_db


def test_a_deployment_is_awaited_with_an_event_not_a_sleep(workspace):
    demo_workflows.load(workspace, base_url="http://127.0.0.1:9")
    execution = demo_workflows.start_deployment(workspace, "checkout")
    helpers.run_engine()
    ready = helpers.step(execution, "ready")
    assert ready.status == "WAITING" and ready.lease_token is None, "waiting for the event, not polling"
    rollout_step = Step.objects.get(execution__parent=execution, vertex="roll")
    assert rollout_step.status == "READY", "the rollout takes a while (a durable timer)"

    helpers.make_due()
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    output = ok(api(workspace).get(f"/api/v1/executions/{execution.pk}"))["output"]
    assert output["url"] == f"https://{output['deploymentId']}.demo.invalid/"
    assert output["deploymentId"].startswith("checkout-")
    assert helpers.step(execution, "ready").attempt == 1, "delivered once, no retry"


def test_the_demo_starts_a_deployment_every_time(workspace):
    demo_workflows.load(workspace, base_url="http://127.0.0.1:9")
    started = demo_workflows.start(workspace, "hello")
    assert [e.workflow.key for e in started] == ["hello", "deploy-service"]
