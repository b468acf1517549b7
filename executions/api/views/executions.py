"""Starting executions and reading them: lists, one execution's detail, children, events."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import exports, pagination
from executions.api import serializers as s
from executions.api.schema import page_of, problems
from executions.api.views.base import ApiView, acting, body, header, query, writes
from executions.services import lifecycle as services
from workflows import tags as tag_rules
from workflows.models import Role

TAG = ["executions"]

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False, pattern=r"^[!-~](?:[ -~]{0,253}[!-~])?$",
    description="Makes the start safe to repeat: the same key with the same body returns the same "
                "execution (200); the same key with another body is a 409.")


class ExecutionList(ApiView):
    @extend_schema(operation_id="list_executions", tags=TAG, parameters=[s.ExecutionListQuery],
                   description="Newest first. `?tag=key:value` (repeated): only executions with all of these tags.",
                   responses={200: page_of(s.ExecutionSerializer, "Execution")})
    def get(self, request: Request) -> Response:
        params = query(s.ExecutionListQuery, request, repeatable=("tag",))
        after = pagination.EXECUTION.after(params.get("cursor"))
        rows = selectors.executions.page(
            self.principal.workspace, status=params.get("status"), workflow=params.get("workflow"),
            parent=params.get("parent"), top_level=params.get("top_level"), after=after, limit=params["limit"],
            waiting=params.get("waiting"), tags=tag_rules.search(params.get("tag") or []))
        return pagination.page(request, rows, params["limit"], pagination.EXECUTION, selectors.executions.page_key,
                               lambda rows: s.ExecutionSerializer(rows, many=True).data)


class StartExecution(ApiView):
    @extend_schema(
        operation_id="start_execution", tags=TAG, request=s.StartExecution, parameters=[IDEMPOTENCY_KEY],
        description="Start an execution of a workflow's current version, or of a pinned version. "
                    "Needs the operator role.",
        responses={201: OpenApiResponse(s.ExecutionSerializer, description="Started."),
                   200: OpenApiResponse(s.ExecutionSerializer, description="Started earlier with this "
                                                                           "Idempotency-Key and body."),
                   **problems(s404="No such workflow or version in this workspace.",
                              s409="The idempotency key was used with another body, or the workflow has "
                                   "no published version.",
                              s429="The workspace's daily execution quota is used up.")})
    @writes("execution.start", Role.OPERATOR, "start executions", limit="MAX_START_BYTES")
    def post(self, request: Request) -> Response:
        data = body(s.StartExecution, request)
        key = header(request, "Idempotency-Key")
        principal = self.principal
        target = data.get("workflow") or data["version"]
        with acting(principal, "execution.start", Role.OPERATOR, target=target, what="start executions"):
            started = services.start_execution(principal.workspace, workflow=data.get("workflow"),
                                               version=data.get("version"), input=data["input"],
                                               idempotency_key=key, created_by=principal.label,
                                               system_actor=principal.system_actor, tags=data.get("tags"),
                                               priority=data.get("priority"))
        execution = selectors.executions.get(principal.workspace, started.execution.pk, with_counts=True)
        location = request.build_absolute_uri(reverse("api:execution", kwargs={"id": execution.pk}))
        return Response(s.ExecutionSerializer(execution).data, status=201 if started.created else 200,
                        headers={"Location": location})


class ExecutionDetail(ApiView):
    @extend_schema(operation_id="get_execution", tags=TAG, responses={200: s.ExecutionDetailSerializer},
                   description="Status, pinned version, lineage, timings, input and output, steps, and for a "
                               "fan-out its counts by status and the merge state.")
    def get(self, request: Request, id: uuid.UUID) -> Response:
        execution = selectors.executions.with_detail(
            selectors.executions.get(self.principal.workspace, id, with_counts=True))
        return Response(s.ExecutionDetailSerializer(execution).data)

    @extend_schema(operation_id="change_execution", tags=TAG, request=s.ChangeExecution,
                   description="Change the priority of the execution's whole tree (its root and every descendant, "
                               "running or not); audited. Needs the operator role.",
                   responses={200: s.ExecutionSerializer, **problems(s404="No such execution.")})
    @writes("execution.priority", Role.OPERATOR, "change priorities", target="{id}")
    def patch(self, request: Request, id: uuid.UUID) -> Response:
        data = body(s.ChangeExecution, request)
        principal = self.principal
        with acting(principal, "execution.priority", Role.OPERATOR, target=str(id), what="change priorities",
                    detail={"priority": data["priority"]}):
            services.set_priority(services.get_execution(principal.workspace, id), data["priority"],
                                  system_actor=principal.system_actor)
        return Response(s.ExecutionSerializer(selectors.executions.get(principal.workspace, id,
                                                                       with_counts=True)).data)


class _PayloadStream(ApiView):
    which = ""

    def stream(self, id: uuid.UUID) -> StreamingHttpResponse:
        execution = selectors.executions.get(self.principal.workspace, id)
        name = selectors.payloads.store.INPUT if self.which == "input" else execution.output_vertex
        if not name or not selectors.payloads.exists(execution.pk, name):
            raise NotFound(f"execution {execution.pk} has no {self.which} stored"
                           + ("" if self.which == "input" or name else " (it has no output yet)"))
        return StreamingHttpResponse(selectors.payloads.stream(execution.pk, name), content_type="application/json")


class ExecutionInput(_PayloadStream):
    which = "input"

    @extend_schema(operation_id="get_execution_input", tags=TAG,
                   description="The whole input as JSON, streamed (large lists element by element).",
                   responses={(200, "application/json"): OpenApiTypes.ANY,
                              **problems(s404="No such execution, or its input was purged.")})
    def get(self, request: Request, id: uuid.UUID) -> StreamingHttpResponse:
        return self.stream(id)


class ExecutionOutput(_PayloadStream):
    which = "output"

    @extend_schema(operation_id="get_execution_output", tags=TAG,
                   description="The whole output (of the vertex that finished the execution) as JSON, streamed.",
                   responses={(200, "application/json"): OpenApiTypes.ANY,
                              **problems(s404="No such execution, or it has no output (yet).")})
    def get(self, request: Request, id: uuid.UUID) -> StreamingHttpResponse:
        return self.stream(id)


class MergeOutput(ApiView):
    @extend_schema(operation_id="get_merge_output", tags=TAG, parameters=[s.MergeOutputQuery],
                   description="A MERGE's output in pages: each child's output in item order (null unless "
                               "it succeeded), with the counts. Works for any fan-out size; a MERGE over more "
                               "than SB_MERGE_INLINE_ITEMS children stores only its counts, and this is where "
                               "its items are read.",
                   responses={200: s.MergeOutputPage,
                              **problems(s404="No such execution, or the vertex is not a MERGE of its workflow.")})
    def get(self, request: Request, id: uuid.UUID, vertex: str) -> Response:
        params = query(s.MergeOutputQuery, request)
        after = pagination.INDEX.after(params.get("cursor"))
        execution = selectors.executions.get(self.principal.workspace, id)
        found = selectors.payloads.merge_page(execution, vertex, after=after[0] if after else -1,
                                              limit=params["limit"] + 1)
        response = pagination.page(request, found.items, params["limit"], pagination.INDEX, lambda item: [item.index],
                                   lambda rows: s.MergeItemSerializer(rows, many=True).data)
        response.data = {"vertex": found.vertex, "spawner": found.spawner, "total": found.total,
                         "counts": found.counts, **response.data}
        return response


class ExecutionChildren(ApiView):
    @extend_schema(operation_id="list_children", tags=TAG, parameters=[s.ChildrenQuery],
                   description="A fan-out's children in item order; every filter given must match (`item_key`, "
                               "`item_key__in`, `error_contains`, `status`, `spawner`).",
                   responses={200: page_of(s.ExecutionSerializer, "Child")})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        params = query(s.ChildrenQuery, request)
        after = pagination.CHILD.after(params.get("cursor"))
        parent = selectors.executions.get(self.principal.workspace, id)
        found = selectors.children.Filter(status=params.get("status") or "", spawner=params.get("spawner") or "",
                                          item_keys=_item_keys(params),
                                          error_contains=params.get("error_contains") or "")
        rows = selectors.children.page(parent, found, after=after, limit=params["limit"])
        return pagination.page(request, rows, params["limit"], pagination.CHILD, selectors.children.page_key,
                               lambda rows: s.ExecutionSerializer(rows, many=True).data)


def _item_keys(params: dict[str, Any]) -> tuple[str, ...] | None:
    """``item_key`` and ``item_key__in`` as one set of keys (both given: children with the one key,
    if it is among the others); None: no key filter."""
    if "item_key" in params and "item_key__in" in params:
        return tuple(k for k in params["item_key__in"] if k == params["item_key"])
    if "item_key" in params:
        return (params["item_key"],)
    if "item_key__in" in params:
        return tuple(dict.fromkeys(params["item_key__in"]))
    return None


WRITERS: dict[str, Callable[[Iterable[selectors.children.ExportedChild]], Iterator[bytes]]] = {
    "jsonl": exports.jsonl, "csv": exports.csv_rows}


class _ChildrenExport(ApiView):
    """Every child of an execution, streamed: one keyset page of children in memory at a time."""

    media_type = ""
    suffix = ""  # a key of WRITERS

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[BaseRenderer, str]:
        # The body is a file, not a rendered value: any Accept gets it (problems stay JSON).
        return super().perform_content_negotiation(request, force=True)

    def export(self, request: Request, id: uuid.UUID) -> StreamingHttpResponse:
        status = query(s.ChildrenExportQuery, request).get("status")
        parent = selectors.executions.get(self.principal.workspace, id)
        rows = selectors.children.export(parent, status=status)
        response = StreamingHttpResponse(WRITERS[self.suffix](rows), content_type=self.media_type)
        name = f"children-{parent.pk}{'-' + status.lower() if status else ''}.{self.suffix}"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


def _export_schema(operation_id: str, media_type: str, what: str) -> Any:
    return extend_schema(
        operation_id=operation_id, tags=TAG, parameters=[s.ChildrenExportQuery],
        description=f"Every child of the execution, in item order, as {what}, streamed (any number of children; "
                    "an output larger than 64 KiB is given as its size only). `?status=FAILED`: only those.",
        responses={(200, media_type): OpenApiResponse(OpenApiTypes.STR, description=what)})


class ExecutionChildrenJsonl(_ChildrenExport):
    media_type, suffix = "application/x-ndjson", "jsonl"

    @_export_schema("export_children_jsonl", "application/x-ndjson",
                    "JSON Lines: one object per child (index, id, spawner, status, attempt, error, output, "
                    "outputBytes)")
    def get(self, request: Request, id: uuid.UUID) -> StreamingHttpResponse:
        return self.export(request, id)


class ExecutionChildrenCsv(_ChildrenExport):
    media_type, suffix = "text/csv", "csv"

    @_export_schema("export_children_csv", "text/csv",
                    "CSV with a header row: index, id, spawner, status, attempt, error, output (JSON), output_bytes")
    def get(self, request: Request, id: uuid.UUID) -> StreamingHttpResponse:
        return self.export(request, id)


class ExecutionEvents(ApiView):
    @extend_schema(operation_id="list_events", tags=TAG, parameters=[s.EventsQuery],
                   description="Every status transition of the execution and its steps, oldest first.",
                   responses={200: page_of(s.EventSerializer, "Event")})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        params = query(s.EventsQuery, request)
        after = pagination.EVENT.after(params.get("cursor"))
        execution = selectors.executions.get(self.principal.workspace, id)
        rows = selectors.steps.events(execution, after=after[0] if after else 0, limit=params["limit"] + 1)
        return pagination.page(request, rows, params["limit"], pagination.EVENT, lambda row: [row.id],
                               lambda rows: s.EventSerializer(rows, many=True).data)
