"""Issue 33 §1 (S9): a MERGE that succeeded with tolerated failures has an output that counts
them (``"FAILED": 41``). When an operator retries those children and they succeed, the merge
re-evaluates its output: the counts and the items follow the children, in the API
(``GET …/output``) and in the execution view alike, and the parent's events say so."""

from __future__ import annotations

import json
from typing import Any

import pytest

from executions.models import Event
from tests.support import handlers, helpers
from tests.support.clients import api, ok, text

pytestmark = pytest.mark.django_db

def streamed(response: Any) -> Any:
    assert response.status_code == 200, response
    return json.loads(b"".join(response.streaming_content))


TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.5}}


@pytest.mark.parametrize("inline_items", [True, False], ids=["items-inline", "items-paged"])
def test_retried_children_that_succeed_update_the_merge_output(workspace, operator, settings, inline_items):
    if not inline_items:
        settings.SB = {**settings.SB, "MERGE_INLINE_ITEMS": 3}
    failing = {1, 4, 7}
    handlers.set_flaky(True)
    parent = helpers.run_fanout(workspace, 10, failing=failing, child=helpers.FLAKY, merge_config=TOLERANT)
    assert parent.status == "SUCCEEDED"
    client = api(workspace, "operator")
    before = streamed(client.get(f"/api/v1/executions/{parent.id}/output"))
    assert before["counts"] == {"SUCCEEDED": 7, "FAILED": 3, "CANCELLED": 0}

    handlers.set_flaky(False)  # the destination is fixed
    ok(client.post(f"/api/v1/executions/{parent.id}/children/retry-failed", format="json"))
    helpers.run_engine()
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert helpers.child_counts(parent) == {"SUCCEEDED": 10}

    after = streamed(client.get(f"/api/v1/executions/{parent.id}/output"))
    assert after["counts"] == {"SUCCEEDED": 10, "FAILED": 0, "CANCELLED": 0}
    if inline_items:
        assert [item["i"] for item in after["items"]] == list(range(10))  # the retried children's outputs too
    assert Event.objects.filter(execution=parent, message__startswith="merge output re-evaluated").exists()
    page = text(operator.get(f"/executions/{parent.id}/"))
    assert '"FAILED": 3' not in page and "&quot;FAILED&quot;: 3" not in page
