"""The worker registry (issue 17 §4): workers register with a heartbeat row, a dead host's
rows expire, and the number of drain slots follows the live workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from executions import kick, registry, worker
from executions.core import leases
from executions.models import WorkerProcess
from executions.worker import loop, slots
from tests.support import helpers

pytestmark = pytest.mark.django_db


def register(cursor: Any, host: str, pid: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_WORKER_NAME", host)
    registry.register(cursor, cluster="schemabridge:1", pid=pid)


def age(host: str, seconds: float) -> None:
    """Move a host's last heartbeat ``seconds`` into the past (database time)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_workerprocess SET last_seen = now() - make_interval(secs => %s) "
                       "WHERE host = %s", [seconds, host])


@pytest.fixture
def held_slots() -> Iterator[list[int]]:
    """Take drain slots from other sessions (as live drains elsewhere would); released after."""
    sessions: list[psycopg.Connection[Any]] = []
    taken: list[int] = []

    def hold(slot: int) -> None:
        session = psycopg.connect(**connection.get_connection_params(), autocommit=True)
        sessions.append(session)
        row = session.execute(slots.TRY_SLOT, {"class": kick.ADVISORY_CLASS, "slot": slot}).fetchone()
        assert row is not None and row[0]
        taken.append(slot)

    taken_fn: Any = hold
    yield taken_fn
    for session in sessions:
        session.close()


def test_a_worker_registers_with_host_pid_cluster_and_database_times(monkeypatch):
    with connection.cursor() as cursor:
        register(cursor, "host-a", 4242, monkeypatch)
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    row = WorkerProcess.objects.get()
    assert (row.host, row.pid, row.cluster) == ("host-a", 4242, "schemabridge:1")
    assert row.started == row.last_seen == now  # database time (the transaction's now())


def test_a_heartbeat_refreshes_last_seen_and_re_registers_a_deleted_row(monkeypatch):
    with connection.cursor() as cursor:
        register(cursor, "host-a", 7, monkeypatch)
        age("host-a", 20)
        registry.heartbeat(cursor, pid=7)
        cursor.execute("SELECT last_seen >= now() - interval '1 second' FROM executions_workerprocess")
        assert cursor.fetchone()[0]
        WorkerProcess.objects.all().delete()  # expired and cleaned up while this process stalled
        registry.heartbeat(cursor, cluster="schemabridge:1", pid=7)
    assert list(WorkerProcess.objects.values_list("host", "pid")) == [("host-a", 7)]


def test_the_worker_label_names_the_host_by_sb_worker_name(monkeypatch):
    monkeypatch.setenv("SB_WORKER_NAME", "host-3")
    assert leases.worker_label().startswith("host-3:")
    monkeypatch.delenv("SB_WORKER_NAME")
    assert not leases.worker_label().startswith("host-3:")


def test_drain_slots_follow_the_live_workers(monkeypatch, settings):
    settings.SB = {**settings.SB, "DRAIN_SLOTS": 0, "WORKER_TTL_SECONDS": 30.0}
    with connection.cursor() as cursor:
        assert registry.drain_slots(cursor) == 1  # nobody registered yet: one drain still runs
        for pid in (1, 2, 3):
            register(cursor, "host-a", pid, monkeypatch)
        for pid in (4, 5):
            register(cursor, "host-b", pid, monkeypatch)
        assert registry.drain_slots(cursor) == 5
        settings.SB = {**settings.SB, "DRAIN_SLOTS": 2}  # SB_DRAIN_SLOTS is only a cap
        assert registry.drain_slots(cursor) == 2
        settings.SB = {**settings.SB, "DRAIN_SLOTS": 0}
        age("host-a", 31)  # host-a died: its rows are older than the TTL
        assert registry.drain_slots(cursor) == 2
        assert registry.live_workers(cursor) == [("host-b", 4), ("host-b", 5)]


@pytest.mark.django_db(transaction=True)  # the tick manages its own connection (close_old_connections)
def test_a_dead_hosts_registrations_expire_and_the_tick_deletes_them(monkeypatch, settings):
    settings.SB = {**settings.SB, "WORKER_TTL_SECONDS": 30.0}
    with connection.cursor() as cursor:
        register(cursor, "host-a", 1, monkeypatch)
        register(cursor, "host-b", 2, monkeypatch)
    age("host-a", 29)
    assert worker.tick()["workers_expired"] == 0  # within the TTL: still alive
    age("host-a", 31)
    assert worker.tick()["workers_expired"] == 1
    assert list(WorkerProcess.objects.values_list("host", flat=True)) == ["host-b"]


def test_a_drain_takes_a_slot_only_while_fewer_drains_than_live_workers(monkeypatch, held_slots):
    with connection.cursor() as cursor:
        register(cursor, "host-a", 1, monkeypatch)
        register(cursor, "host-b", 2, monkeypatch)
    held_slots(0)
    held_slots(1)
    assert slots.take() is None  # two live workers, two drains alive
    with connection.cursor() as cursor:
        register(cursor, "host-c", 3, monkeypatch)
    slot = slots.take()
    try:
        assert slot == 2
    finally:
        if slot is not None:
            slots.release(slot)


def test_a_kick_enqueues_a_drain_only_while_a_slot_is_free(monkeypatch, held_slots):
    enqueued: list[str] = []
    monkeypatch.setattr("django_q.tasks.async_task", lambda name, **kwargs: enqueued.append(name))
    with connection.cursor() as cursor:
        register(cursor, "host-a", 1, monkeypatch)
        register(cursor, "host-b", 2, monkeypatch)
        cursor.execute("UPDATE executions_drainkick SET last_enqueued_at = now() - interval '1 hour'")
    held_slots(0)
    held_slots(1)
    assert kick.request_drain(force=True) is False
    with connection.cursor() as cursor:
        register(cursor, "host-c", 3, monkeypatch)
    assert kick.request_drain(force=True) is True
    assert enqueued == ["executions.worker.drain"]


def test_a_long_worker_name_still_fits_a_lease(monkeypatch):
    monkeypatch.setenv("SB_WORKER_NAME", "h" * 300)
    assert len(leases.worker_label()) <= 100  # executions_step.leased_by
    with connection.cursor() as cursor:
        registry.register(cursor, pid=1)
    assert WorkerProcess.objects.get().host == "h" * 80


def test_a_busy_drain_asks_for_help_again_when_its_request_was_refused(workspace, monkeypatch):
    """A drain that finds a backlog asks for a second drain. A refused request (a drain was
    enqueued in the last 250 ms — the one now running, say) is asked again later, not dropped:
    otherwise one drain runs the whole backlog while the other workers idle, and nobody
    reaps if it stalls (seen in the stale_lease chaos scenario)."""
    asked: list[bool] = []

    def request_drain(force: bool = False) -> bool:
        asked.append(force)
        return len(asked) > 1  # the first request is refused, the next one enqueues

    monkeypatch.setattr(kick, "request_drain", request_drain)
    monkeypatch.setattr(loop, "HELP_RETRY", 0.0)
    helpers.publish(workspace, "noop", helpers.NOOP)
    for index in range(12):
        helpers.start(workspace, "noop", {"i": index})
    asked.clear()  # starting executions kicks; only the drain's own requests count
    done = worker.Drain(max_seconds=30, idle_seconds=0, threads=0, batch=4, linger=False).run()
    assert done == 12
    assert asked == [False, False], "asked again after the refusal, and not after the enqueue"
