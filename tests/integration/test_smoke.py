"""A first end-to-end check of the engine in-process: fan-out through a merge."""

import pytest

from tests.support import helpers

pytestmark = pytest.mark.django_db


def test_fanout_through_merge_in_process(workspace):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    execution = helpers.start(workspace, "parent", {"items": list(range(300))})
    helpers.run_engine()
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", execution.error
    assert helpers.child_counts(execution) == {"SUCCEEDED": 300}
