"""Schedules with a fake clock: fire times, at most one execution each (also racing), catch-up
after downtime, pausing, refused starts, reserved workflows, DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from executions import selectors
from executions.models import Execution, Schedule
from executions.services import schedules
from tests.support import helpers
from tests.support.claims import make_actor, publish_system
from tests.support.threads import race
from workflows import actors
from workflows.errors import Conflict, Invalid, NotFound
from workflows.management.commands.sb_actor import actor_admin
from workflows.sudo import ReservedKeyDenied, VerifiedActor

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def minute(n: int) -> datetime:
    """The fire time n minutes after 12:00 UTC of T0's day."""
    return datetime(2026, 11, 30, 12, 0, tzinfo=UTC) + timedelta(minutes=n)


def every_minute(workspace: Any, *, name: str = "each-minute", catch_up: bool = False, **fields: Any) -> Schedule:
    helpers.publish(workspace, "hello", helpers.NOOP)
    return schedules.create_schedule(workspace, name=name, workflow="hello", cron="* * * * *", catch_up=catch_up,
                                     input={"n": 1}, by="user:test", now=T0, **fields)


def keys() -> list[str]:
    return list(Execution.objects.order_by("idempotency_key").values_list("idempotency_key", flat=True))


def test_the_first_fire_time_is_the_first_after_now(workspace: Any) -> None:
    schedule = every_minute(workspace)
    assert schedule.next_run_at == minute(1) and schedule.enabled and schedule.timezone == "UTC"


def test_a_fire_time_starts_one_execution_with_its_key_and_creator(workspace: Any) -> None:
    every_minute(workspace)
    assert schedules.fire_due(now=minute(1) - timedelta(seconds=1)) == 0
    assert schedules.fire_due(now=minute(1) + timedelta(seconds=5)) == 1
    execution = Execution.objects.get()
    assert execution.idempotency_key == "schedule:each-minute:2026-11-30T12:01:00Z"
    assert execution.created_by == "schedule:each-minute"
    schedule = Schedule.objects.get()
    assert schedule.next_run_at == minute(2) and schedule.last_run_at == minute(1)
    assert schedule.last_execution_id == execution.pk and schedule.last_error == ""
    # Later ticks within the same minute start nothing more.
    assert schedules.fire_due(now=minute(1) + timedelta(seconds=30)) == 0
    assert Execution.objects.count() == 1


def test_a_fire_time_already_started_is_not_started_again(workspace: Any) -> None:
    """A restart that lost the advance of next_run_at (or a moved clock) meets the idempotency key."""
    every_minute(workspace)
    assert schedules.fire_due(now=minute(1)) == 1
    Schedule.objects.update(next_run_at=minute(1))  # as if the advance had been lost
    assert schedules.fire_due(now=minute(1) + timedelta(seconds=20)) == 0
    assert keys() == ["schedule:each-minute:2026-11-30T12:01:00Z"]
    assert Schedule.objects.get().next_run_at == minute(2)


@pytest.mark.django_db(transaction=True)
def test_racing_workers_start_each_fire_time_once(workspace: Any) -> None:
    every_minute(workspace, catch_up=True)
    Schedule.objects.update(next_run_at=minute(-4))
    results = race(*[lambda: schedules.fire_due(now=minute(1) + timedelta(seconds=1))] * 6)
    assert sum(results) == 6  # 11:56 … 12:01
    assert len(keys()) == len(set(keys())) == 6


def test_catch_up_runs_each_missed_fire_time_once_up_to_the_limit(workspace: Any) -> None:
    every_minute(workspace, catch_up=True)
    # Down from 12:00:30 until 12:30:10: 30 fire times were missed; the 10 most recent run.
    assert schedules.fire_due(now=minute(30) + timedelta(seconds=10)) == schedules.CATCH_UP_LIMIT
    assert keys() == [f"schedule:each-minute:2026-11-30T12:{m:02d}:00Z" for m in range(21, 31)]
    assert Schedule.objects.get().next_run_at == minute(31)


def test_without_catch_up_only_the_latest_fire_time_runs_and_only_if_on_time(workspace: Any) -> None:
    every_minute(workspace)
    assert schedules.fire_due(now=minute(30) + timedelta(seconds=10)) == 1
    assert keys() == ["schedule:each-minute:2026-11-30T12:30:00Z"]
    hourly = schedules.create_schedule(workspace, name="hourly", workflow="hello", cron="0 * * * *", now=T0)
    assert hourly.next_run_at == minute(60)
    # Back at 15:10 after a long outage: 13:00, 14:00 and 15:00 were missed, 15:00 is 10 minutes old.
    schedules.fire_due(now=minute(190))
    assert not Execution.objects.filter(created_by="schedule:hourly").exists()
    assert Schedule.objects.get(name="hourly").next_run_at == minute(240)


def test_a_paused_schedule_does_not_fire_and_resumes_from_now(workspace: Any) -> None:
    schedule = every_minute(workspace)
    paused = schedules.update_schedule(schedule, enabled=False)
    assert paused.next_run_at is None
    assert schedules.fire_due(now=minute(10)) == 0
    resumed = schedules.update_schedule(paused, enabled=True, now=minute(10) + timedelta(seconds=1))
    assert resumed.next_run_at == minute(11)
    assert schedules.fire_due(now=minute(11)) == 1
    assert keys() == ["schedule:each-minute:2026-11-30T12:11:00Z"]


def test_a_new_cron_or_time_zone_moves_the_next_run(workspace: Any) -> None:
    schedule = every_minute(workspace)
    changed = schedules.update_schedule(schedule, cron="0 9 * * *", timezone="Europe/Berlin", now=T0)
    assert changed.next_run_at == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)  # 09:00 CET
    unchanged = schedules.update_schedule(changed, input={"n": 2}, catch_up=True, now=T0)
    assert unchanged.next_run_at == changed.next_run_at and unchanged.input == {"n": 2}


def test_the_input_reaches_the_execution(workspace: Any) -> None:
    every_minute(workspace)
    schedules.fire_due(now=minute(1))
    execution = Execution.objects.get()
    assert selectors.payloads.input_of(execution) == {"n": 1}


@pytest.mark.parametrize(("fields", "field"), [
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "* * * * * *"}, "cron"),
    ({"cron": "every minute"}, "cron"),
    ({"cron": 5}, "cron"),
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"timezone": "../../etc/passwd"}, "timezone"),
    ({"name": "bad name"}, "name"),
    ({"catch_up": "yes"}, "catch_up"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_fields_are_refused_by_name(workspace: Any, fields: dict[str, Any], field: str) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    with pytest.raises(Invalid) as refused:
        schedules.create_schedule(workspace, **{"name": "s", "workflow": "hello", "cron": "* * * * *", **fields})
    assert [error["field"] for error in refused.value.errors] == [field]
    assert not Schedule.objects.exists()


def test_an_unknown_workflow_is_not_found_by_name(workspace: Any) -> None:
    with pytest.raises(NotFound) as refused:
        schedules.create_schedule(workspace, name="s", workflow="missing", cron="* * * * *")
    assert [error["field"] for error in refused.value.errors] == ["workflow"]
    assert not Schedule.objects.exists()


def test_a_name_is_unique_in_its_workspace(workspace: Any, other_workspace: Any) -> None:
    every_minute(workspace)
    with pytest.raises(Conflict):
        every_minute(workspace)
    assert every_minute(other_workspace).workspace == other_workspace


def test_a_refused_start_is_skipped_with_its_reason(workspace: Any) -> None:
    every_minute(workspace)
    workspace.plan.executions_per_day = 0
    workspace.plan.save()
    assert schedules.fire_due(now=minute(1)) == 0
    schedule = Schedule.objects.get()
    assert "quota" in schedule.last_error and schedule.next_run_at == minute(2) and schedule.last_run_at is None


def test_a_reserved_workflow_needs_its_actor_to_schedule_and_to_fire(workspace: Any) -> None:
    publish_system(workspace, "system.nightly", helpers.NOOP)
    with pytest.raises(ReservedKeyDenied):
        schedules.create_schedule(workspace, name="n", workflow="system.nightly", cron="* * * * *", now=T0)
    deployer = make_actor("deployer", ("system.*",))
    verified = VerifiedActor("deployer", ("system.*",))
    schedule = schedules.create_schedule(workspace, name="n", workflow="system.nightly", cron="* * * * *",
                                         system_actor=verified, now=T0)
    assert schedule.system_actor == "deployer"
    assert schedules.fire_due(now=minute(1)) == 1
    with pytest.raises(ReservedKeyDenied):
        schedules.update_schedule(schedule, enabled=False)
    with pytest.raises(ReservedKeyDenied):
        schedules.delete_schedule(schedule)
    with actor_admin():
        actors.deactivate(deployer.row, by="test")
    assert schedules.fire_due(now=minute(2)) == 0  # a deactivated actor's schedule starts nothing
    assert "reserved" in Schedule.objects.get().last_error


def test_fire_times_follow_daylight_saving_time() -> None:
    # 02:30 does not exist in Berlin on 2026-03-29: that day fires at 03:00 CEST (01:00 UTC).
    spring = schedules.next_after("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    assert spring == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert schedules.next_after("30 2 * * *", "Europe/Berlin", spring) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)
    # 09:00 local is 08:00 UTC in winter, 07:00 UTC in summer.
    assert schedules.next_after("0 9 * * *", "Europe/Berlin", datetime(2026, 3, 27, 12, tzinfo=UTC)).hour == 8
    assert schedules.next_after("0 9 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, tzinfo=UTC)).hour == 7


def test_due_times_walk_back_from_now_without_scanning_the_outage() -> None:
    since = datetime(2020, 1, 1, tzinfo=UTC)
    found = schedules.due_times("* * * * *", "UTC", since=since, now=minute(0) + timedelta(seconds=59), limit=3)
    assert found == [minute(-2), minute(-1), minute(0)]
    assert schedules.due_times("* * * * *", "UTC", since=minute(0), now=minute(0), limit=3) == [minute(0)]


def test_a_null_input_is_kept_as_json_null(workspace: Any) -> None:
    helpers.publish(workspace, "hello", helpers.NOOP)
    schedule = schedules.create_schedule(workspace, name="n", workflow="hello", cron="* * * * *", input=None, now=T0)
    assert Schedule.objects.get(pk=schedule.pk).input is None
    assert schedules.fire_due(now=minute(1)) == 1
    assert selectors.payloads.input_of(Execution.objects.get()) is None


def test_a_cron_that_never_fires_is_refused() -> None:
    with pytest.raises(Invalid) as refused:
        schedules.validated({"cron": "0 0 31 2 *"})
    assert refused.value.errors[0]["field"] == "cron"


def test_a_schedule_whose_start_breaks_does_not_hold_up_the_others(workspace: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    broken = every_minute(workspace, name="a-broken")
    schedules.create_schedule(workspace, name="b-fine", workflow="hello", cron="* * * * *", now=T0)
    real_start = schedules.starts.start_in

    def start_in(cursor: Any, **kwargs: Any) -> Any:
        if kwargs["created_by"] == "schedule:a-broken":
            raise RuntimeError("a bug")
        return real_start(cursor, **kwargs)

    monkeypatch.setattr(schedules.starts, "start_in", start_in)
    assert schedules.fire_due(now=minute(1)) == 1
    assert keys() == ["schedule:b-fine:2026-11-30T12:01:00Z"]
    broken.refresh_from_db()
    assert broken.next_run_at == minute(2) and "a bug" in broken.last_error


def test_every_due_schedule_fires_however_many_are_due(workspace: Any) -> None:
    """250 every-minute schedules: one pass started 100 and the rest missed their fire time."""
    helpers.publish(workspace, "hello", helpers.NOOP)
    for n in range(250):
        schedules.create_schedule(workspace, name=f"s-{n:03d}", workflow="hello", cron="* * * * *", now=T0)
    assert schedules.fire_due(now=minute(1) + timedelta(seconds=5)) == 250
    assert Schedule.objects.filter(next_run_at=minute(2), last_run_at=minute(1), last_error="").count() == 250


def test_repeating_the_same_cron_keeps_the_fire_time_that_is_due(workspace: Any) -> None:
    schedule = every_minute(workspace)
    late = minute(1) + timedelta(seconds=20)  # 12:01 is due and not yet fired
    same = schedules.update_schedule(schedule, cron="* * * * *", timezone="UTC", input={"n": 3}, now=late)
    assert same.next_run_at == minute(1)
    assert schedules.fire_due(now=late) == 1 and keys() == ["schedule:each-minute:2026-11-30T12:01:00Z"]
    moved = schedules.update_schedule(same, cron="*/5 * * * *", now=late)
    assert moved.next_run_at == minute(5)


def test_skipped_fire_times_say_why(workspace: Any) -> None:
    every_minute(workspace)
    hourly = schedules.create_schedule(workspace, name="hourly", workflow="hello", cron="0 * * * *", now=T0)
    schedules.fire_due(now=minute(190))  # 13:00, 14:00 and 15:00 missed; 15:00 is 10 minutes old
    hourly.refresh_from_db()
    assert hourly.last_error.startswith("skipped the missed fire times from 2026-11-30T13:00:00+00:00 to "
                                        "2026-11-30T15:00:00+00:00: catch_up is off")
    minutely = Schedule.objects.get(name="each-minute")  # 12:01 … 15:10 missed, 15:10 ran
    assert minutely.last_run_at == minute(190) and "to 2026-11-30T15:09:00+00:00" in minutely.last_error


@pytest.mark.parametrize("fields, field, words", [
    ({"timezone": "localtime"}, "timezone", "depends on the host"),
    ({"timezone": "posixrules"}, "timezone", "depends on the host"),
    ({"cron": "1-0 * * * *"}, "cron", "minute 1-0"),
    ({"cron": "* * * * fri-mon"}, "cron", "day-of-week fri-mon"),
    ({"cron": "0 0 * dec-jan/2 *"}, "cron", "month dec-jan/2"),
])
def test_host_dependent_zones_and_backward_ranges_are_refused(fields: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(Invalid) as refused:
        schedules.validated({"cron": "* * * * *", **fields})
    assert refused.value.errors[0]["field"] == field and words in refused.value.errors[0]["message"]
    assert schedules.validated({"cron": "0 9 * * mon-fri", "timezone": "Europe/Berlin"})


def test_a_deactivated_actors_schedule_says_which_actor_and_why(workspace: Any) -> None:
    publish_system(workspace, "system.nightly", helpers.NOOP)
    deployer = make_actor("deployer", ("system.*",))
    schedules.create_schedule(workspace, name="n", workflow="system.nightly", cron="* * * * *",
                              system_actor=VerifiedActor("deployer", ("system.*",)), now=T0)
    with actor_admin():
        actors.deactivate(deployer.row, by="test")
    assert schedules.fire_due(now=minute(1)) == 0
    error = Schedule.objects.get().last_error
    assert "system actor 'deployer' is deactivated or removed" in error and "'system.nightly'" in error


@pytest.mark.django_db(transaction=True)  # the tick manages its own connection (close_old_connections)
def test_the_tick_fires_schedules_before_its_retention_pass(workspace: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long retention pass (up to SB_RETENTION_TICK_SECONDS) must not make fires late."""
    from executions import worker
    from executions.core import retention

    every_minute(workspace)
    Schedule.objects.update(next_run_at=minute(-1))  # due now, by the database clock
    seen: list[int] = []
    real = retention.run_pass

    def run_pass(**kwargs: Any) -> Any:
        seen.append(Execution.objects.filter(created_by="schedule:each-minute").count())
        return real(**kwargs)

    monkeypatch.setattr(retention, "run_pass", run_pass)
    worker.tick()
    assert seen == [1]


def test_a_schedules_input_cannot_name_an_upload(workspace: Any) -> None:
    """Every fire failed with 'is a JSON object, not a list': the marker was kept as text."""
    helpers.publish(workspace, "hello", helpers.NOOP)
    with pytest.raises(Invalid) as refused:
        schedules.create_schedule(workspace, name="n", workflow="hello", cron="* * * * *", now=T0,
                                  input={"entries": {"$upload": "6f1c0e6a-0000-4000-8000-000000000000"}})
    assert refused.value.errors[0]["field"] == "input" and "cannot name an upload" in refused.value.errors[0]["message"]
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("stored, words", [
    ({"cron": "5-5 * * * *"}, "minute 5-5"),  # croniter 7 reads it as every minute
    ({"cron": "1-0 * * * *"}, "minute 1-0"),
    ({"timezone": "localtime"}, "depends on the host"),
])
def test_a_stored_schedule_the_rules_now_refuse_fires_nothing_and_says_why(workspace: Any, stored: dict[str, Any],
                                                                          words: str) -> None:
    """A schedule saved before its cron or time zone was refused (an older release, or a row
    written around the service) must not fire at times its author never meant (``5-5`` would
    fire every minute): it is paused, with the reason in last_error, until it is saved again."""
    every_minute(workspace)
    Schedule.objects.update(**stored)
    assert schedules.fire_due(now=minute(7) + timedelta(seconds=5)) == 0
    schedule = Schedule.objects.get()
    assert not schedule.enabled and schedule.next_run_at is None and Execution.objects.count() == 0
    assert words in schedule.last_error and "paused; no fire time starts until" in schedule.last_error
    assert schedules.fire_due(now=minute(9)) == 0
    fixed = schedules.update_schedule(schedule, cron="5 * * * *", timezone="UTC", enabled=True, now=minute(9))
    assert fixed.enabled and fixed.next_run_at == minute(65)
