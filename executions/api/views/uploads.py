"""Uploads: a list of items as JSON Lines or CSV, streamed into the database, for a start to
name with ``{"$upload": "<id>"}`` (executions/services/uploads.py)."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response

from executions.api import serializers as s
from executions.api.parsers import Unread
from executions.api.views.base import ApiView, acting, writes
from executions.services import uploads
from workflows.models import Role

TAG = ["uploads"]
BODY = {"type": "string", "format": "binary"}


class CreateUpload(ApiView):
    parser_classes = [Unread]

    @extend_schema(
        operation_id="create_upload", tags=TAG,
        request={"application/x-ndjson": BODY, "text/csv": BODY},
        description="Store a list of items: JSON Lines (one JSON value per line; blank lines skipped) or CSV "
                    "(a header row, then one object of strings per row). The body is streamed, up to "
                    "SB_UPLOAD_MAX_BYTES (1 GB by default); a bad line refuses the whole upload with its line "
                    "number. A start then names it where a list is expected: "
                    '`"input": {"entries": {"$upload": "<id>"}}`. Unused uploads are deleted after '
                    "SB_UPLOAD_RETENTION_SECONDS. Needs the operator role.",
        responses={201: OpenApiResponse(s.UploadSerializer, description="Stored.")})
    @writes("upload.create", Role.OPERATOR, "upload items", limit="UPLOAD_MAX_BYTES", streamed=True)
    def post(self, request: Request) -> Response:
        format = uploads.media_format(request.content_type or "")
        if format is None:
            raise UnsupportedMediaType(request.content_type or "none",
                                       detail="an upload is application/x-ndjson (JSON Lines) or text/csv")
        principal = self.principal
        detail: dict[str, Any] = {"format": format}
        with acting(principal, "upload.create", Role.OPERATOR, target="", what="upload items", detail=detail):
            received = uploads.receive(principal.workspace.pk, request._request.read, format=format,
                                       created_by=principal.label)
            detail.update(id=str(received.id), items=received.items, bytes=received.bytes)
        return Response(s.UploadSerializer(received).data, status=201)


class DeleteUpload(ApiView):
    @extend_schema(operation_id="delete_upload", tags=TAG, request=None,
                   description="Delete an upload and its items: its bytes leave the payload store and the "
                               "workspace's upload quota. Executions started from it keep their input (a start "
                               "copies the list). A 409 while a start is copying it. Needs the operator role.",
                   responses={204: OpenApiResponse(description="Deleted.")})
    @writes("upload.delete", Role.OPERATOR, "delete uploads", target="{id}")
    def delete(self, request: Request, id: uuid.UUID) -> Response:
        principal = self.principal
        with acting(principal, "upload.delete", Role.OPERATOR, target=str(id), what="delete uploads"):
            uploads.delete(principal.workspace.pk, id)
        return Response(status=204)
