"""Destinations (S11): the external systems HTTP vertices call, with their concurrency
limits. Listing needs any role; creating and editing need the operator role."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from executions import selectors
from executions.api import pagination
from executions.api import resource_serializers as r
from executions.api import serializers as s
from executions.api.schema import page_of, problems
from executions.api.views.base import ApiView, acting, body, query, writes
from executions.destinations import rules as destinations
from workflows.models import Role

TAG = ["destinations"]


class DestinationList(ApiView):
    @extend_schema(operation_id="list_destinations", tags=TAG, parameters=[s.PageQuery],
                   responses={200: page_of(r.DestinationSerializer, "Destination")})
    def get(self, request: Request) -> Response:
        params = query(s.PageQuery, request)
        after = pagination.NAME.after(params.get("cursor"))
        rows = selectors.destinations.page(self.principal.workspace, after=after[0] if after else None,
                                           limit=params["limit"])
        return pagination.page(request, rows, params["limit"], pagination.NAME, lambda row: [row.name],
                               lambda rows: r.DestinationSerializer(rows, many=True).data)


class CreateDestination(ApiView):
    @extend_schema(operation_id="create_destination", tags=TAG, request=r.CreateDestination,
                   responses={201: r.DestinationSerializer,
                              **problems(s409="A destination with this name already exists.")})
    @writes("destination.create", Role.OPERATOR, "create destinations")
    def post(self, request: Request) -> Response:
        data = body(r.CreateDestination, request)
        principal = self.principal
        with acting(principal, "destination.create", Role.OPERATOR, target=str(data.get("name", ""))[:100],
                    what="create destinations"):
            created = destinations.create_destination(principal.workspace, system_actor=principal.system_actor,
                                                      **data)
        location = request.build_absolute_uri(reverse("api:destination", kwargs={"name": created.name}))
        return Response(r.DestinationSerializer(created).data, status=201, headers={"Location": location})


class DestinationDetail(ApiView):
    @extend_schema(operation_id="get_destination", tags=TAG, responses={200: r.DestinationSerializer})
    def get(self, request: Request, name: str) -> Response:
        return Response(r.DestinationSerializer(selectors.destinations.named(self.principal.workspace, name)).data)


class UpdateDestination(ApiView):
    @extend_schema(operation_id="update_destination", tags=TAG, request=r.UpdateDestination,
                   description="Change a destination's URL, timeout, limits or response cap; a new "
                               "concurrency limit applies at the next claim on every worker. A new URL, "
                               "credentials, timeout or response cap reaches every call that starts after "
                               "this returns (while its steps run, the answer waits about a second for "
                               "the workers' copies of the old values to lapse).",
                   responses={200: r.DestinationSerializer})
    @writes("destination.update", Role.OPERATOR, "edit destinations", target="{name}")
    def patch(self, request: Request, name: str) -> Response:
        data = body(r.UpdateDestination, request)
        principal = self.principal
        detail: dict[str, Any] = {}
        with acting(principal, "destination.update", Role.OPERATOR, target=name, what="edit destinations",
                    detail=detail):
            current = selectors.destinations.named(principal.workspace, name)
            before = destinations.origin(current.base_url)
            detail["fields"] = sorted(data)  # the audit row says what was to change
            updated = destinations.update_destination(current, system_actor=principal.system_actor, **data)
            if destinations.origin(updated.base_url) != before:  # the audit row says where calls go now
                detail.update(origin_from="{}://{}:{}".format(*before),
                              origin_to="{}://{}:{}".format(*destinations.origin(updated.base_url)),
                              credentials="replaced" if "credentials" in data else "none")
        return Response(r.DestinationSerializer(updated).data)
