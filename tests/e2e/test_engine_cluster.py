"""The engine under a real qcluster subprocess."""

import pytest

from executions.models import Execution
from tests import helpers
from tests.e2e.conftest import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_fanout_completes_on_a_real_cluster(qcluster):
    workspace = helpers.default_workspace()
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    execution = helpers.start(workspace, "parent", {"items": list(range(500))})
    cluster = qcluster(workers=2)
    done = wait_for(lambda: Execution.objects.filter(pk=execution.pk, status="SUCCEEDED").exists()
                    or helpers.refresh(execution).is_terminal, timeout=90, what="the fan-out to finish")
    assert done
    execution = helpers.refresh(execution)
    assert execution.status == "SUCCEEDED", (execution.error, cluster.log()[-3000:])
    assert helpers.child_counts(execution) == {"SUCCEEDED": 500}
