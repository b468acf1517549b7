"""Schedules: start a workflow on a cron schedule (executions/services/schedules.py). Listing needs
any role; creating, changing and deleting need the author role. A schedule of a reserved
workflow needs a verified system-actor claim, like starting one does."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import pagination
from executions.api import resource_serializers as r
from executions.api import serializers as s
from executions.api.schema import page_of, problems
from executions.api.views.base import ApiView, acting, body, query, writes
from executions.services import schedules
from workflows.models import Role

TAG = ["schedules"]


class ScheduleList(ApiView):
    @extend_schema(operation_id="list_schedules", tags=TAG, parameters=[s.PageQuery],
                   description="The workspace's schedules by name, with their next and last runs.",
                   responses={200: page_of(r.ScheduleSerializer, "Schedule")})
    def get(self, request: Request) -> Response:
        params = query(s.PageQuery, request)
        after = pagination.NAME.after(params.get("cursor"))
        rows = selectors.schedules.page(self.principal.workspace, after=after[0] if after else None,
                                        limit=params["limit"])
        return pagination.page(request, rows, params["limit"], pagination.NAME, lambda row: [row.name],
                               lambda rows: r.ScheduleSerializer(rows, many=True).data)


class CreateSchedule(ApiView):
    @extend_schema(operation_id="create_schedule", tags=TAG, request=r.CreateSchedule,
                   description="Start `workflow` (its current version) with `input` at every fire time of "
                               "`cron` in `timezone`. Each fire time starts at most one execution (idempotency "
                               "key `schedule:<name>:<fire time, ISO UTC>`). Needs the author role.",
                   responses={201: r.ScheduleSerializer,
                              **problems(s404="No workflow with this key in this workspace.",
                                         s409="A schedule with this name already exists.")})
    @writes("schedule.create", Role.AUTHOR, "create schedules")
    def post(self, request: Request) -> Response:
        data = body(r.CreateSchedule, request)
        principal = self.principal
        with acting(principal, "schedule.create", Role.AUTHOR, target=str(data.get("name", ""))[:100],
                    what="create schedules"):
            created = schedules.create_schedule(principal.workspace, by=principal.label,
                                                system_actor=principal.system_actor, **data)
        location = request.build_absolute_uri(reverse("api:schedule", kwargs={"name": created.name}))
        return Response(r.ScheduleSerializer(created).data, status=201, headers={"Location": location})


class ScheduleDetail(ApiView):
    @extend_schema(operation_id="get_schedule", tags=TAG, responses={200: r.ScheduleSerializer})
    def get(self, request: Request, name: str) -> Response:
        return Response(r.ScheduleSerializer(selectors.schedules.named(self.principal.workspace, name)).data)


class UpdateSchedule(ApiView):
    @extend_schema(operation_id="update_schedule", tags=TAG, request=r.UpdateSchedule,
                   description="Pause (`\"enabled\": false`) or resume a schedule, or change its cron, time "
                               "zone, input or catch_up. A new cron or time zone, or resuming, moves the next "
                               "run to the first fire time after now. Needs the author role.",
                   responses={200: r.ScheduleSerializer})
    @writes("schedule.update", Role.AUTHOR, "change schedules", target="{name}")
    def patch(self, request: Request, name: str) -> Response:
        data = body(r.UpdateSchedule, request)
        principal = self.principal
        with acting(principal, "schedule.update", Role.AUTHOR, target=name, what="change schedules"):
            schedule = selectors.schedules.named(principal.workspace, name)
            updated = schedules.update_schedule(schedule, system_actor=principal.system_actor, **data)
        return Response(r.ScheduleSerializer(updated).data)

    @extend_schema(operation_id="delete_schedule", tags=TAG, request=None,
                   description="Delete a schedule; the executions it started stay. Needs the author role.",
                   responses={204: OpenApiResponse(description="Deleted.")})
    @writes("schedule.delete", Role.AUTHOR, "delete schedules", target="{name}")
    def delete(self, request: Request, name: str) -> Response:
        principal = self.principal
        with acting(principal, "schedule.delete", Role.AUTHOR, target=name, what="delete schedules"):
            schedules.delete_schedule(selectors.schedules.named(principal.workspace, name),
                                      system_actor=principal.system_actor)
        return Response(status=204)
