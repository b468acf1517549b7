"""Real worker processes register in the worker registry and keep their row alive; when
their host dies the rows expire and the drain slots shrink with them (issue 17 §4)."""

import psutil
import pytest
from django.db import connection

from executions import registry
from executions.models import WorkerProcess
from tests.support.cluster import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def last_seen(host: str) -> dict[int, object]:
    return dict(WorkerProcess.objects.filter(host=host).values_list("pid", "last_seen"))


def test_each_worker_process_registers_beats_and_expires_with_its_host(qcluster, settings):
    cluster = qcluster(workers=2, SB_WORKER_NAME="host-hb", SB_WORKER_HEARTBEAT_SECONDS="0.5",
                       SB_WORKER_TTL_SECONDS="3")
    first = wait_for(lambda: len(last_seen("host-hb")) == 2 and last_seen("host-hb"), timeout=60,
                     what="both worker processes to register")
    worker_pids = {process.pid for process in psutil.Process(cluster.proc.pid).children(recursive=True)}
    assert set(first) <= worker_pids, (first, worker_pids, cluster.log()[-2000:])
    wait_for(lambda: all(last_seen("host-hb").get(pid, first[pid]) > first[pid] for pid in first), timeout=10,
             what="a heartbeat of each worker process")
    settings.SB = {**settings.SB, "WORKER_TTL_SECONDS": 3.0, "DRAIN_SLOTS": 0}
    with connection.cursor() as cursor:
        assert registry.drain_slots(cursor) == 2
    cluster.kill()  # the host dies: no more heartbeats

    def slots() -> int:
        with connection.cursor() as cursor:
            return registry.drain_slots(cursor)

    wait_for(lambda: slots() == 1, timeout=10, what="the dead host's rows to expire")
    with connection.cursor() as cursor:
        assert registry.expire(cursor) >= 1  # the tick's clean-up (a respawn may have expired one already)

    def all_expired() -> bool:
        # A worker the sentinel respawned just before the kill may have beaten once more:
        # its row too goes once its TTL passes, since nothing of the host is left to renew it.
        with connection.cursor() as cursor:
            registry.expire(cursor)
        return last_seen("host-hb") == {}

    wait_for(all_expired, timeout=15, what="every row of the dead host to expire")
