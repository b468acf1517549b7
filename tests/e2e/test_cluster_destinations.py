"""Destination limits across real worker processes (S11)."""

from __future__ import annotations

import pytest
from django.db import connection

from executions.destinations import rules as destinations
from executions.models import Destination, Execution, Step
from tests.support import factories, helpers
from tests.support.cluster import wait_for
from tests.support.httpserver import serve

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_limit_holds_across_worker_processes_and_can_be_raised_live(qcluster):
    workspace = factories.default_workspace()
    with serve() as (url, recorder):
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=10,
                                         concurrency_limit=3)
        helpers.publish(workspace, "call", helpers.http_doc("api", "/slow/0.25"))
        for i in range(60):
            helpers.start(workspace, "call", {"i": i})
        cluster = qcluster(workers=2)
        wait_for(lambda: len(recorder.requests) >= 24, timeout=90, what="a third of the calls")
        assert recorder.peak == 3, f"peak {recorder.peak} with a limit of 3; log: {cluster.log()[-2000:]}"

        recorder.peak = recorder.in_flight
        destinations.update_destination(api, concurrency_limit=8)
        wait_for(lambda: not Execution.objects.exclude(status="SUCCEEDED").exists(), timeout=120,
                 what="all 60 calls to finish")
        assert 3 < recorder.peak <= 8, f"peak after raising the limit: {recorder.peak}"
    assert len(recorder.requests) == 60
    assert Step.objects.filter(destination=api, status="RUNNING").count() == 0


def test_a_killed_workers_slots_come_back_after_lease_expiry(qcluster):
    workspace = factories.default_workspace()
    with serve() as (url, _):
        api = Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=30,
                                         concurrency_limit=2)
        helpers.publish(workspace, "call", helpers.http_doc("api", "/slow/20"))
        executions = [helpers.start(workspace, "call", {"i": i}) for i in range(2)]
        first = qcluster(workers=2, SB_LEASE_SECONDS="3")
        wait_for(lambda: Step.objects.filter(destination=api, status="RUNNING").count() == 2, timeout=60,
                 what="both slots taken")
        first.kill()
        assert Step.objects.filter(destination=api, status="RUNNING").count() == 2

        helpers.publish(workspace, "call", helpers.http_doc("api", "/ok"))  # later work is quick
        quick = [helpers.start(workspace, "call", {"i": i}) for i in range(4)]
        qcluster(workers=2, SB_LEASE_SECONDS="3")
        wait_for(lambda: all(helpers.refresh(e).status == "SUCCEEDED" for e in quick), timeout=90,
                 what="quick calls to get the freed slots")
    assert Step.objects.filter(destination=api, status="RUNNING").count() <= 2
    assert [helpers.step(e, "call").lease_expiries for e in executions] == [1, 1], "the dead worker's steps were reaped"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM executions_step WHERE destination_id = %s AND status = 'RUNNING' "
                       "AND lease_expires_at < now() - interval '10 seconds'", [api.pk])
        assert cursor.fetchone()[0] == 0, "no slot is held by an expired lease"
