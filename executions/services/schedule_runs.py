"""Run a schedule now: an operator's extra run of a schedule's workflow with its input, outside
its cron (the Schedules page's *Run now*). It starts like any start (lifecycle.start_execution:
the current version, the quota, stored-upload placements) and is recorded as the schedule's last
run; the next fire time stays as it was. It has no fire time, so no fire-time idempotency key:
each *Run now* starts one execution."""

from __future__ import annotations

from django.db import transaction

from executions.models import Execution, Schedule
from executions.services import lifecycle, schedules
from workflows import sudo


def run_now(schedule: Schedule, *, by: str) -> Execution:
    """Start ``schedule``'s workflow with its input now, as ``by`` (e.g. ``user:oper``).
    A schedule of a reserved workflow is refused (ReservedKeyDenied): only a signed system
    actor starts one, and an operator's session never is."""
    sudo.require(schedule.workflow.key, None, "running a schedule of")
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().select_related("workflow").get(pk=schedule.pk)
        started = lifecycle.start_execution(locked.workspace, workflow=locked.workflow.key, input=locked.input,
                                            created_by=f"{schedules.created_by(locked.name)} (run now by {by})")
        Schedule.objects.filter(pk=locked.pk).update(last_execution_id=started.execution.pk,
                                                     last_run_at=schedules.db_now())
    return started.execution
