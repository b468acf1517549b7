"""Operator actions on executions (S9, S18): retry a failed execution or step, retry every
failed child of a fan-out, cancel, cancel the open children. Each needs the operator role
and is audited."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import serializers as s
from executions.api.schema import problems
from executions.api.views.base import ApiView, acting, body, query, writes
from executions.fanout import recovery
from executions.models import Step
from executions.services import lifecycle as services
from workflows.models import Role, Workspace

TAG = ["executions"]
NOT_RETRYABLE = problems(s409="Not in a state that allows this (not FAILED, failed by design on a FAIL "
                              "vertex, or under a cancelled ancestor).")


class RetryExecution(ApiView):
    @extend_schema(operation_id="retry_execution", tags=TAG, request=s.RetryExecution,
                   description="Retry a FAILED execution (a child or a top-level one): same id, same "
                               "idempotency key, a new attempt of the step it failed on. A parent whose merge "
                               "failed re-evaluates when its retried children finish. With `input`, the "
                               "execution's input is replaced first (noted in its events and the audit log). "
                               "The body may be empty.",
                   responses={200: s.RetryResultSerializer, **NOT_RETRYABLE})
    @writes("execution.retry", Role.OPERATOR, "retry executions", target="{id}", limit="MAX_START_BYTES")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        data = body(s.RetryExecution, request)
        principal = self.principal
        edit = {"input": data["input"]} if "input" in data else {}
        detail = {"input_edited": True} if edit else None
        with acting(principal, "execution.retry", Role.OPERATOR, target=str(id), what="retry executions",
                    detail=detail):
            step = services.retry_execution(services.get_execution(principal.workspace, id), actor=principal.label,
                                            system_actor=principal.system_actor, **edit)
        return _retried(principal.workspace, id, step)


class RetryStep(ApiView):
    @extend_schema(operation_id="retry_step", tags=TAG, request=None,
                   description="Retry one FAILED step. A failed SPAWNER re-links the children that exist "
                               "(failed ones are not re-run) and creates only the never-started ones. A SPAWNER "
                               "whose failFast MERGE failed (a failFast stop leaves it SUCCEEDED) is retried as "
                               "`children/retry-failed` with its `spawner` is: its failed and failFast-cancelled "
                               "children re-run and it spawns the items it never started (S28).",
                   responses={200: s.RetryResultSerializer, **NOT_RETRYABLE})
    @writes("step.retry", Role.OPERATOR, "retry steps", target="{id}/{vertex}")
    def post(self, request: Request, id: uuid.UUID, vertex: str) -> Response:
        principal = self.principal
        with acting(principal, "step.retry", Role.OPERATOR, target=f"{id}/{vertex}", what="retry steps"):
            step = services.retry_step(services.get_execution(principal.workspace, id), vertex,
                                       actor=principal.label, system_actor=principal.system_actor)
        return _retried(principal.workspace, id, step)


def _retried(workspace: Workspace, execution_id: uuid.UUID, step: Step) -> Response:
    execution = selectors.executions.get(workspace, execution_id, with_counts=True)
    return Response(s.RetryResultSerializer({"execution": execution, "step": step}).data)


class RetryFailedChildren(ApiView):
    @extend_schema(operation_id="retry_failed_children", tags=TAG, request=s.RetryFailedChildren,
                   description="Retry every FAILED child (of one SPAWNER, if `spawner` is given) in one "
                               "transaction. Where the fan-out's failFast merge failed, the children failFast "
                               "cancelled are re-run too and the items its spawner never started are spawned, "
                               "once each (S28); children an operator cancelled, or that failed on a FAIL "
                               "vertex, are left alone. `GET` on this path previews the counts. The body may "
                               "be empty.",
                   responses={200: s.RetriedSerializer, **problems(s409="The execution or an ancestor was "
                                                                        "cancelled, or its tree's payloads were "
                                                                        "purged.")})
    @writes("execution.retry-failed-children", Role.OPERATOR, "retry executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        data = body(s.RetryFailedChildren, request)
        principal = self.principal
        with acting(principal, "execution.retry-failed-children", Role.OPERATOR, target=str(id),
                    what="retry executions"):
            counts = services.retry_failed_children(services.get_execution(principal.workspace, id),
                                                    spawner=data.get("spawner"), actor=principal.label,
                                                    system_actor=principal.system_actor)
        return Response(_counts(counts))


class RetryFailedPreview(ApiView):
    @extend_schema(operation_id="preview_retry_failed_children", tags=TAG,
                   parameters=[s.RetryFailedQuery],
                   description="What `POST` on this path — and retrying the SPAWNER step of a merge that "
                               "failed (`POST …/steps/{spawner}/retry`, with `?spawner=`) — would re-run and "
                               "spawn now. Nothing changes.",
                   responses={200: s.RetriedSerializer})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        spawner = query(s.RetryFailedQuery, request).get("spawner")
        execution = selectors.executions.get(self.principal.workspace, id)
        return Response(_counts(services.retry_failed_preview(execution, spawner=spawner)))


def _counts(counts: recovery.Counts) -> dict[str, int]:
    return s.RetriedSerializer({"retried": counts.retried, "failed": counts.failed,
                                "cancelled_by_fail_fast": counts.cancelled_by_fail_fast,
                                "never_started": counts.never_started}).data


class CancelExecution(ApiView):
    @extend_schema(operation_id="cancel_execution", tags=TAG, request=None,
                   description="Cancel an execution and every open descendant (chained executions are "
                               "independent and keep running).",
                   responses={200: s.CancelResultSerializer, **problems(s409="The execution already finished.")})
    @writes("execution.cancel", Role.OPERATOR, "cancel executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        principal = self.principal
        with acting(principal, "execution.cancel", Role.OPERATOR, target=str(id), what="cancel executions"):
            cancelled = services.cancel_execution(services.get_execution(principal.workspace, id),
                                                  actor=principal.label, system_actor=principal.system_actor)
        execution = selectors.executions.get(principal.workspace, id, with_counts=True)
        return Response(s.CancelResultSerializer({"execution": execution, "cancelled": cancelled}).data)


class CancelOpenChildren(ApiView):
    @extend_schema(operation_id="cancel_open_children", tags=TAG, request=None,
                   description="Cancel every unfinished child of the execution, and everything under them, "
                               "also when the execution itself has finished (S18). `cancelled` is 0 when none "
                               "was open.",
                   responses={200: s.CancelledChildrenSerializer})
    @writes("execution.cancel-open-children", Role.OPERATOR, "cancel executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        principal = self.principal
        with acting(principal, "execution.cancel-open-children", Role.OPERATOR, target=str(id),
                    what="cancel executions"):
            cancelled = services.cancel_open_children(services.get_execution(principal.workspace, id),
                                                      actor=principal.label, system_actor=principal.system_actor)
        return Response(s.CancelledChildrenSerializer({"cancelled": cancelled}).data)
