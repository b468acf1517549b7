"""Workflow definitions and their immutable, content-addressed versions (S14)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions.api import pagination
from executions.api import serializers as s
from executions.api.errors import BadRequest
from executions.api.schema import page_of
from executions.api.views.base import ApiView, acting, query, writes
from workflows import selectors
from workflows.dsl import schema as dsl_schema
from workflows.dsl.parser import WORKFLOW_KEY
from workflows.models import Role
from workflows.services import publish_version

TAG = ["workflows"]
KEY_RULE = "a workflow key is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"

EXAMPLE_DSL = {
    "start": "fan",
    "vertices": {
        "fan": {"type": "SPAWNER", "items": "$.input.entries", "workflow": "migrate-entry", "next": "join"},
        "join": {"type": "MERGE", "spawner": "fan", "next": "done"},
        "done": {"type": "SUCCEED"},
    },
}


class WorkflowList(ApiView):
    @extend_schema(operation_id="list_workflows", tags=TAG, parameters=[s.PageQuery],
                   responses={200: page_of(s.WorkflowSerializer, "Workflow")})
    def get(self, request: Request) -> Response:
        params = query(s.PageQuery, request)
        after = pagination.NAME.after(params.get("cursor"))
        rows = selectors.definitions_page(self.principal.workspace, after=after[0] if after else None,
                                          limit=params["limit"])
        return pagination.page(request, rows, params["limit"], pagination.NAME, lambda row: [row.key],
                               lambda rows: s.WorkflowSerializer(rows, many=True).data)


class WorkflowDetail(ApiView):
    @extend_schema(operation_id="get_workflow", tags=TAG, responses={200: s.WorkflowDetailSerializer})
    def get(self, request: Request, key: str) -> Response:
        return Response(s.WorkflowDetailSerializer(selectors.definition(self.principal.workspace, key)).data)


class PublishVersion(ApiView):
    @extend_schema(
        operation_id="publish_version", tags=TAG, request={"application/json": dsl_schema.DOCUMENT},
        description="Publish a DSL document as a version of workflow `key` (created if new) and make it "
                    "current. The version's id is the SHA-256 of the canonical DSL, so publishing the same "
                    "logic again creates nothing. Invalid documents are refused with every error and its "
                    "JSON path. Needs the author role.",
        examples=[OpenApiExample("a fan-out", value=EXAMPLE_DSL, request_only=True)],
        responses={201: OpenApiResponse(s.PublishedSerializer, description="A new version, now current."),
                   200: OpenApiResponse(s.PublishedSerializer, description="This logic was already a version; "
                                                                           "it is now current.")})
    @writes("workflow.publish", Role.AUTHOR, "publish workflow versions", target="{key}",
            limit="MAX_PUBLISH_BYTES")
    def post(self, request: Request, key: str) -> Response:
        if not WORKFLOW_KEY.fullmatch(key):
            raise BadRequest("invalid workflow key", errors=[{"field": "key", "message": KEY_RULE}])
        doc = request.data
        principal = self.principal
        with acting(principal, "workflow.publish", Role.AUTHOR, target=key, what="publish workflow versions"):
            published = publish_version(principal.workspace, key, doc, author=principal.label,
                                        system_actor=principal.system_actor)
        data = {"key": key, "hash": published.version.hash, "created": published.created}
        return Response(s.PublishedSerializer(data).data, status=201 if published.created else 200)


class VersionDetail(ApiView):
    @extend_schema(operation_id="get_version", tags=TAG, responses={200: s.VersionSerializer})
    def get(self, request: Request, hash: str) -> Response:
        return Response(s.VersionSerializer(selectors.version(self.principal.workspace, hash)).data)
