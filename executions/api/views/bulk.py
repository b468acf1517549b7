"""Filtered bulk actions (issue 31 §5): retry or cancel the children of an execution that
match a filter, as a durable operation (202 with its id), and read its progress; the error
groups of its failed children (issue 33 §3), each a filter term of a bulk retry."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import bulk_serializers as b
from executions.api.schema import problems
from executions.api.views.base import ApiView, acting, body, writes
from executions.services import bulk as bulk_services
from executions.services import lifecycle
from workflows.models import Role

TAG = ["executions"]
FILTER_DOC = ("The filter's terms are ANDed: `status` (a list), `error_contains`, `indexes` (a list), "
              "`error_signature` (an error group's), `item_keys` (a list of business keys), optionally narrowed "
              "to one `spawner`; at least one term is "
              "required (400 naming the fields otherwise). The matched children are recorded in the operation's "
              "ledger at once; workers then act on each exactly once, in batches, and record `done` or `skipped` "
              "with the reason. Read the progress at `GET /api/v1/operations/{id}`.")


def _start(view: ApiView, request: Request, id: uuid.UUID, action: str, audit: str, what: str) -> Response:
    terms = body(b.BulkFilter, request)
    principal = view.principal
    detail: dict[str, Any] = {"filter": terms}
    with acting(principal, audit, Role.OPERATOR, target=str(id), what=what, detail=detail):
        started = bulk_services.start(lifecycle.get_execution(principal.workspace, id), action, terms,
                                      actor=principal.label, system_actor=principal.system_actor)
        detail.update(operation=str(started.operation), matched=started.matched)  # recorded after the body
    return Response(b.OperationStarted({"operation": started.operation, "matched": started.matched}).data,
                    status=202)


class RetryChildren(ApiView):
    @extend_schema(operation_id="retry_children", tags=TAG, request=b.BulkFilter,
                   description="Retry the children that match a filter, as a durable bulk operation, with the "
                               "rules and locks of `children/retry-failed` (which stays as it is): FAILED children "
                               "with a failed step re-run (a new round, S16), children failFast cancelled re-run "
                               "when the merge failed (S28); the others are skipped with the reason. " + FILTER_DOC,
                   responses={202: b.OperationStarted,
                              **problems(s409="The execution or an ancestor was cancelled.")})
    @writes("execution.children-retry", Role.OPERATOR, "retry executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        return _start(self, request, id, "retry", "execution.children-retry", "retry executions")


class CancelChildren(ApiView):
    @extend_schema(operation_id="cancel_children", tags=TAG, request=b.BulkFilter,
                   description="Cancel the unfinished children that match a filter, and everything under them "
                               "(S18), as a durable bulk operation; finished children are skipped with the "
                               "reason. `children/cancel-open` stays as it is. " + FILTER_DOC,
                   responses={202: b.OperationStarted})
    @writes("execution.children-cancel", Role.OPERATOR, "cancel executions", target="{id}")
    def post(self, request: Request, id: uuid.UUID) -> Response:
        return _start(self, request, id, "cancel", "execution.children-cancel", "cancel executions")


class OperationDetail(ApiView):
    @extend_schema(operation_id="get_operation", tags=TAG,
                   description="A bulk operation's progress: `matched`, `done`, `skipped` (with the reason per "
                               "skipped child: the first 100, and the count per reason) and `state`.",
                   responses={200: b.OperationSerializer})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        return Response(b.OperationSerializer(selectors.bulk.get(self.principal.workspace, id)).data)


class ErrorGroups(ApiView):
    @extend_schema(operation_id="error_groups", tags=TAG,
                   description="The execution's FAILED children grouped by error signature (the error with "
                               "numbers, ids and quoted values taken out; HTTP status codes kept), largest first "
                               "(at most 20), each with its count and one example. Retry a group with "
                               "`POST …/children/retry` and `{\"error_signature\": signature}`.",
                   responses={200: b.ErrorGroup(many=True)})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        execution = selectors.executions.get(self.principal.workspace, id)
        return Response(b.ErrorGroup(selectors.bulk.error_groups(execution.pk), many=True).data)
