"""Schedules under a real qcluster that is SIGKILLed and restarted across fire times: each
fire time starts exactly one execution (catch-up after the downtime, no duplicates for fire
times the killed cluster had already started)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from executions.models import Execution, Schedule
from executions.services import schedules
from tests.support import factories, helpers
from tests.support.cluster import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


def minute_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def scheduled_keys() -> list[str]:
    return list(Execution.objects.filter(created_by="schedule:every-minute")
                .order_by("idempotency_key").values_list("idempotency_key", flat=True))


def all_done() -> bool:
    executions = Execution.objects.filter(created_by="schedule:every-minute")
    return executions.exists() and all(execution.is_terminal for execution in executions)


def test_a_killed_and_restarted_cluster_starts_each_fire_time_once(qcluster) -> None:
    workspace = factories.default_workspace()
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedule = schedules.create_schedule(workspace, name="every-minute", workflow="hello", cron="* * * * *",
                                         catch_up=True, input={"from": "schedule"})
    # The workers were down for the last three fire times: a starting cluster catches up.
    now = schedules.db_now()
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=minute_floor(now) - timedelta(minutes=2))
    first = qcluster(workers=2)
    wait_for(lambda: len(scheduled_keys()) >= 3 and all_done(), timeout=60,
             what="the first cluster to start the missed fire times")
    started_by_first = set(scheduled_keys())
    first.kill()

    # While it is down, the schedule's clock goes back over fire times already started
    # (as if the advance had been lost) and on past more missed ones.
    earliest = minute_floor(now) - timedelta(minutes=5)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=earliest)
    second = qcluster(workers=3)  # several worker processes fire at once as they spawn
    wait_for(lambda: Schedule.objects.get(pk=schedule.pk).next_run_at > schedules.db_now() and all_done()
             and len(scheduled_keys()) >= 6, timeout=60, what="the restarted cluster to catch up")

    # Pause it (the update waits for a fire in progress), so the next minute cannot add a key
    # between the reads below.
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False, next_run_at=None)
    wait_for(all_done, timeout=30, what="the last scheduled executions to finish")
    keys = scheduled_keys()
    assert len(keys) == len(set(keys)), keys  # one execution per fire time
    latest = Schedule.objects.get(pk=schedule.pk).last_run_at
    expected = []
    moment = earliest
    while moment <= latest:
        expected.append(schedules.idempotency_key("every-minute", moment))
        moment += timedelta(minutes=1)
    assert keys == expected, (keys, second.log()[-3000:])
    assert started_by_first <= set(keys)
    statuses = Execution.objects.filter(created_by="schedule:every-minute").values_list("status", flat=True)
    assert set(statuses) == {"SUCCEEDED"}
