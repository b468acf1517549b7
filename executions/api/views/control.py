"""Operators steering running work (issue 31): pause and resume an execution tree (operator
role) or the whole workspace (admin role), and live edits of a running fan-out (operator
role). Each is audited (``acting``)."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import control_serializers as c
from executions.api.schema import problems
from executions.api.views.base import ApiView, acting, body, writes
from executions.services import control
from executions.services import lifecycle as services
from workflows.models import Role

TAG = ["executions"]


def _state(workspace: Any, id: uuid.UUID, changed: bool) -> Response:
    execution = selectors.executions.get(workspace, id)
    state = selectors.pauses.of_execution(execution)
    data = {"paused": state.paused, "paused_at": state.paused_at, "paused_by": state.paused_by,
            "scope": state.scope, "paused_execution": state.paused_execution, "in_flight": state.in_flight,
            "drained": state.drained, "changed": changed}
    return Response(c.PauseResultSerializer(data).data)


class PauseExecution(ApiView):
    @extend_schema(operation_id="pause_execution", tags=TAG, request=None,
                   description="Pause the execution and everything under it: from the return on no step of it "
                               "is claimed and its spawners create no more children; steps already running "
                               "finish and commit (`in_flight` counts them, `drained` once none is left). Timers "
                               "and backoffs keep their due times. Idempotent (`changed: false`). The body may "
                               "be empty.",
                   responses={200: c.PauseResultSerializer, **problems(s409="The execution already finished.")})
    @writes("execution.pause", Role.OPERATOR, "pause executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        principal = self.principal
        with acting(principal, "execution.pause", Role.OPERATOR, target=str(id), what="pause executions"):
            changed = control.pause_execution(services.get_execution(principal.workspace, id),
                                              actor=principal.label, system_actor=principal.system_actor)
        return _state(principal.workspace, id, changed)


class ResumeExecution(ApiView):
    @extend_schema(operation_id="resume_execution", tags=TAG, request=None,
                   description="Resume a paused execution: its due steps are claimed again (timers at their "
                               "own due times) and its spawners go on where they stopped. Idempotent. A pause "
                               "of an ancestor or of the workspace still holds it (`paused_scope`).",
                   responses={200: c.PauseResultSerializer})
    @writes("execution.resume", Role.OPERATOR, "resume executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        principal = self.principal
        with acting(principal, "execution.resume", Role.OPERATOR, target=str(id), what="resume executions"):
            changed = control.resume_execution(services.get_execution(principal.workspace, id),
                                               actor=principal.label, system_actor=principal.system_actor)
        return _state(principal.workspace, id, changed)


def _workspace_state(workspace: Any, changed: bool) -> Response:
    state = selectors.pauses.of_workspace(workspace)
    return Response(c.WorkspacePauseSerializer({
        "workspace": workspace.slug, "paused": state.paused, "paused_at": state.paused_at,
        "paused_by": state.paused_by, "in_flight": state.in_flight, "drained": state.drained,
        "changed": changed}).data)


class PauseWorkspace(ApiView):
    @extend_schema(operation_id="pause_workspace", tags=["workspace"], request=None,
                   description="Pause the whole workspace: nothing of it is claimed; new executions may still "
                               "be started (they wait). Idempotent. The body may be empty.",
                   responses={200: c.WorkspacePauseSerializer})
    @writes("workspace.pause", Role.ADMIN, "pause the workspace", target="workspace")
    def post(self, request: Request) -> Response:
        principal = self.principal
        with acting(principal, "workspace.pause", Role.ADMIN, target=principal.workspace.slug,
                    what="pause the workspace"):
            changed = control.pause_workspace(principal.workspace, actor=principal.label)
        return _workspace_state(principal.workspace, changed)


class ResumeWorkspace(ApiView):
    @extend_schema(operation_id="resume_workspace", tags=["workspace"], request=None,
                   description="Resume the workspace (pauses of single executions stay). Idempotent.",
                   responses={200: c.WorkspacePauseSerializer})
    @writes("workspace.resume", Role.ADMIN, "resume the workspace", target="workspace")
    def post(self, request: Request) -> Response:
        principal = self.principal
        with acting(principal, "workspace.resume", Role.ADMIN, target=principal.workspace.slug,
                    what="resume the workspace"):
            changed = control.resume_workspace(principal.workspace)
        return _workspace_state(principal.workspace, changed)


class WorkspacePause(ApiView):
    @extend_schema(operation_id="get_workspace_pause", tags=["workspace"],
                   responses={200: c.WorkspacePauseSerializer})
    def get(self, request: Request) -> Response:
        return _workspace_state(self.principal.workspace, False)


class EditFanOut(ApiView):
    @extend_schema(operation_id="edit_fanout", tags=TAG, request=c.EditFanOut,
                   description="Override a running fan-out's `maxConcurrency` and/or its merge's "
                               "`failureTolerance` (`maxFailureRatio`, `maxFailures`). Recorded on the fan-out "
                               "and audited; the pinned version and its hash never change. The limit takes "
                               "effect at the next claim; the merge re-evaluates at once (a lower tolerance can "
                               "fail it now under failFast; a higher one lets it succeed).",
                   responses={200: c.EditFanOutResult,
                              **problems(s404="No such execution, or that vertex has not spawned.",
                                         s409="The execution already finished.")})
    @writes("fanout.edit", Role.OPERATOR, "edit fan-outs", target="{id}/{vertex}")
    def patch(self, request: Request, id: uuid.UUID, vertex: str) -> Response:
        data = body(c.EditFanOut, request)
        fields: dict[str, Any] = {}
        if "maxConcurrency" in data:
            fields["max_concurrency"] = data["maxConcurrency"]
        tolerance = data.get("failureTolerance") or {}
        if "maxFailureRatio" in tolerance:
            fields["max_failure_ratio"] = tolerance["maxFailureRatio"]
        if "maxFailures" in tolerance:
            fields["max_failures"] = tolerance["maxFailures"]
        principal = self.principal
        detail: dict[str, Any] = {}
        with acting(principal, "fanout.edit", Role.OPERATOR, target=f"{id}/{vertex}", what="edit fan-outs",
                    detail=detail):
            execution = services.get_execution(principal.workspace, id)
            changes = control.edit_fanout(execution, vertex, actor=principal.label,
                                          system_actor=principal.system_actor, **fields)
            detail["changes"] = changes
        fan = selectors.fanouts.one(execution, vertex)
        return Response(c.EditFanOutResult({
            "spawner_vertex": vertex, "changes": changes, "max_concurrency": fan.max_concurrency,
            "max_failure_ratio": fan.max_failure_ratio, "max_failures": fan.max_failures,
            "allowed_failures": fan.allowed_failures, "decided": fan.decided, "exceeded": fan.exceeded}).data)
