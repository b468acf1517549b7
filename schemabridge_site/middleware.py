"""Request framing the site refuses before any view runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse

PROBLEM_MEDIA_TYPE = "application/problem+json"  # as executions/api/errors.py answers


class RefuseChunkedBodies:
    """A body sent with ``Transfer-Encoding: chunked`` is a ``411``, never an empty body.

    Django reads a request body by its ``Content-Length`` only: without one it sees no body at
    all, so a chunked upload was stored as zero items and a chunked JSON body answered a
    misleading 400. Whether a WSGI server hands a chunked body over de-chunked differs from
    server to server (gunicorn does, the development server does not), so rather than read
    what may be raw chunk framing, every such request is refused with the fix: send a
    Content-Length (curl: ``--data-binary @file`` instead of ``-T -``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            return _length_required()
        return self.get_response(request)


def _length_required() -> HttpResponse:
    detail = ("a request body must be sent with a Content-Length; Transfer-Encoding: chunked is not accepted "
              "(curl: --data-binary @file)")
    body = {"type": "about:blank", "title": HTTPStatus.LENGTH_REQUIRED.phrase, "status": 411,
            "code": "length-required", "detail": detail,
            "errors": [{"field": "Transfer-Encoding", "message": "chunked bodies are not accepted"}]}
    return HttpResponse(json.dumps(body), status=411, content_type=PROBLEM_MEDIA_TYPE)
