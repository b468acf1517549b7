"""REST API routes under /api/v1/ (these paths are a contract).

Django routes a path to one view, so operations sharing a path (list and create) are joined
into one class by ``on_path``; each keeps its own class, method and schema.
"""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from executions.api import converters
from executions.api.views import actions, bulk, control, destinations, executions, schedules, uploads, waits, workflows
from executions.api.views.base import ApiView

converters.register()


def on_path(*views: type[ApiView]) -> Any:
    joined: type[ApiView] = type("".join(view.__name__ for view in views), views, {})
    return joined.as_view()


@extend_schema(exclude=True)
class NoRoute(ApiView):
    """Unknown paths under /api/v1/ answer with a problem, not Django's HTML page."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise NotFound("no such API path")


app_name = "api"
urlpatterns = [
    path("workflows", on_path(workflows.WorkflowList), name="workflows"),
    path("workflows/<wfkey:key>", on_path(workflows.WorkflowDetail), name="workflow"),
    # Any key reaches publishing, which explains what a valid key is (a 400, not a 404).
    path("workflows/<str:key>/versions", on_path(workflows.PublishVersion), name="versions"),
    path("versions/<vhash:hash>", on_path(workflows.VersionDetail), name="version"),
    path("executions", on_path(executions.ExecutionList, executions.StartExecution), name="executions"),
    path("executions/<execid:id>", on_path(executions.ExecutionDetail), name="execution"),
    path("executions/<execid:id>/input", on_path(executions.ExecutionInput), name="input"),
    path("executions/<execid:id>/output", on_path(executions.ExecutionOutput), name="output"),
    path("executions/<execid:id>/children", on_path(executions.ExecutionChildren), name="children"),
    path("executions/<execid:id>/children.jsonl", on_path(executions.ExecutionChildrenJsonl),
         name="children-jsonl"),
    path("executions/<execid:id>/children.csv", on_path(executions.ExecutionChildrenCsv), name="children-csv"),
    path("executions/<execid:id>/events", on_path(executions.ExecutionEvents), name="events"),
    path("executions/<execid:id>/retry", on_path(actions.RetryExecution), name="retry"),
    path("executions/<execid:id>/children/retry-failed",
         on_path(actions.RetryFailedChildren, actions.RetryFailedPreview), name="retry-failed-children"),
    path("executions/<execid:id>/children/cancel-open", on_path(actions.CancelOpenChildren),
         name="cancel-open-children"),
    path("executions/<execid:id>/children/retry", on_path(bulk.RetryChildren), name="retry-children"),
    path("executions/<execid:id>/children/cancel", on_path(bulk.CancelChildren), name="cancel-children"),
    path("executions/<execid:id>/children/error-groups", on_path(bulk.ErrorGroups), name="error-groups"),
    path("operations/<execid:id>", on_path(bulk.OperationDetail), name="operation"),
    path("executions/<execid:id>/steps/<vertex:vertex>/retry", on_path(actions.RetryStep), name="retry-step"),
    path("executions/<execid:id>/steps/<vertex:vertex>/output", on_path(executions.MergeOutput),
         name="merge-output"),
    path("executions/<execid:id>/cancel", on_path(actions.CancelExecution), name="cancel"),
    path("executions/<execid:id>/pause", on_path(control.PauseExecution), name="pause"),
    path("executions/<execid:id>/resume", on_path(control.ResumeExecution), name="resume"),
    path("executions/<execid:id>/fanouts/<vertex:vertex>", on_path(control.EditFanOut), name="fanout"),
    path("workspace/pause", on_path(control.PauseWorkspace, control.WorkspacePause), name="workspace-pause"),
    path("workspace/resume", on_path(control.ResumeWorkspace), name="workspace-resume"),
    path("executions/<execid:id>/steps/<vertex:vertex>/callback", on_path(waits.StepCallback), name="step-callback"),
    path("executions/<execid:id>/steps/<vertex:vertex>/complete", on_path(waits.CompleteStep), name="complete-step"),
    path("callbacks/<str:token>", on_path(waits.Callback), name="callback"),
    path("callbacks/<str:token>/heartbeat", on_path(waits.CallbackHeartbeat), name="callback-heartbeat"),
    path("events", on_path(waits.PostEvent), name="post-event"),
    path("uploads", on_path(uploads.CreateUpload), name="uploads"),
    path("uploads/<execid:id>", on_path(uploads.DeleteUpload), name="upload"),
    path("destinations", on_path(destinations.DestinationList, destinations.CreateDestination),
         name="destinations"),
    path("destinations/<destname:name>", on_path(destinations.DestinationDetail, destinations.UpdateDestination),
         name="destination"),
    path("schedules", on_path(schedules.ScheduleList, schedules.CreateSchedule), name="schedules"),
    path("schedules/<schedname:name>", on_path(schedules.ScheduleDetail, schedules.UpdateSchedule),
         name="schedule"),
    re_path(r"^[\s\S]*", NoRoute.as_view()),  # not ".*": a path with a newline is a problem too
]
