"""What every API view shares: the principal, role checks inside the audit record, and
strict parsing of bodies, query parameters and headers.

The order of a request (``ApiView.initial``) is a security property: authenticate; check
the role a write needs (``@writes``) before reading its body; read the body within its
endpoint's limit (413 from Content-Length, or while reading); only then verify a system
actor's claim (it signs the body) and parse. A viewer's 8 MB start is refused before a byte
of it is read.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.conf import settings
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from executions.api import auth
from executions.api.errors import BadRequest, PayloadTooLarge
from workflows import signing
from workflows.access import Principal
from workflows.audit import audited

_HEADER_VALUE = re.compile(r"[!-~](?:[ -~]{0,253}[!-~])?")
_CHUNK = 64 * 1024
Handler = TypeVar("Handler", bound=Callable[..., Any])


@dataclass(frozen=True)
class Write:
    """What a write handler needs before its body is read: the role (refusals audited as
    ``action`` on ``target``, formatted from the URL's arguments) and its body limit (a key
    of ``settings.SB``)."""

    action: str
    role: str
    what: str
    target: str
    limit: str
    streamed: bool = False


def writes(action: str, role: str, what: str, *, target: str = "", limit: str = "MAX_WRITE_BYTES",
           streamed: bool = False) -> Callable[[Handler], Handler]:
    """Mark a handler as a write: ``ApiView`` checks ``role`` and the body size before the body
    is read or parsed. The handler still runs its write in ``acting`` (the accepted row).

    A ``streamed`` write reads its own body as a stream (an upload): only its declared
    Content-Length is checked here, and no claim may sign it (verifying one needs the whole
    body in memory); the handler enforces the limit while reading."""
    def mark(handler: Handler) -> Handler:
        handler.sb_write = Write(action, role, what, target, limit,  # type: ignore[attr-defined]  # read in initial
                                 streamed)
        return handler
    return mark


class ApiView(APIView):
    @property
    def principal(self) -> Principal:
        return cast(Principal, self.request.user)

    def perform_authentication(self, request: Request) -> None:
        """Authenticate; a claim that did not come with a token is refused here, unread."""
        super().perform_authentication(request)
        auth.refuse_claim_without_token(request)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication, HasPrincipal
        write = self._write(request)
        if write is not None:
            self._check_role(write, kwargs)
        if write is not None and write.streamed:
            check_declared_size(request, int(settings.SB[write.limit]), write.limit)
            if signing.present(request.headers.get):
                raise BadRequest("a system actor's claim cannot sign a streamed upload; send it without X-SB-* "
                                 "headers")
            return
        if write is not None or signing.present(request.headers.get):  # a claim signs the body
            setting = write.limit if write is not None else "MAX_WRITE_BYTES"
            read_body(request, int(settings.SB[setting]), setting)
        auth.apply_claim(request)

    def _write(self, request: Request) -> Write | None:
        handler = getattr(self, (request.method or "").lower(), None)
        return getattr(handler, "sb_write", None)

    def _check_role(self, write: Write, kwargs: dict[str, Any]) -> None:
        principal = self.principal
        if principal.can(write.role):
            return
        with audited(principal, write.action, target=write.target.format(**kwargs)):
            principal.require(write.role, write.what)


def read_body(request: Request, limit: int, setting: str) -> None:
    """Read the request body into memory if it is at most ``limit`` bytes; a 413 otherwise,
    decided from Content-Length before reading anything and, for a body without one (chunked),
    while reading — so no more than ``limit`` + 64 KiB is ever held."""
    django_request = request._request
    if hasattr(django_request, "_body") or django_request._read_started:  # type: ignore[attr-defined]  # Django's own flag
        return
    too_large = PayloadTooLarge(f"the request body is larger than {limit:,} bytes (SB_{setting})")
    check_declared_size(request, limit, setting)
    chunks, size = [], 0
    while chunk := django_request.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    # Django's HttpRequest.body returns _body once set; DRF's parsers then read from it.
    django_request._body = b"".join(chunks)


def check_declared_size(request: Request, limit: int, setting: str) -> None:
    """A 413 for a body whose Content-Length is above ``limit``, before reading any of it."""
    declared = str(request._request.META.get("CONTENT_LENGTH") or "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit:,} bytes (SB_{setting})")


@contextlib.contextmanager
def acting(principal: Principal, action: str, role: str, *, target: str, what: str,
           detail: dict[str, Any] | None = None) -> Iterator[None]:
    """Run a write as ``principal``: the role check and the write share one audit record,
    so a refused attempt (wrong role, unknown id, conflict) is logged with its reason."""
    with audited(principal, action, target=target, detail=detail):
        principal.require(role, what)
        yield


def body(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def query(serializer_class: type[serializers.Serializer], request: Request,
          repeatable: tuple[str, ...] = ()) -> dict[str, Any]:
    """The query parameters, checked. Each may be given once: ``?status=A&status=B`` is
    refused, not read as its last value (which would export or list something else) —
    except those named ``repeatable`` (a list field: ``?tag=a:1&tag=b:2``)."""
    repeated = sorted(name for name, values in request.query_params.lists()
                      if len(values) > 1 and name not in repeatable)
    if repeated:
        raise BadRequest(f"query parameter '{repeated[0]}' is given more than once; give it once",
                         errors=[{"field": name, "message": "given more than once"} for name in repeated])
    # A plain dict: DRF reads an absent boolean in a QueryDict as false, not as absent.
    data: dict[str, Any] = request.query_params.dict()
    data.update({name: request.query_params.getlist(name) for name in repeatable if name in request.query_params})
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def header(request: Request, name: str) -> str | None:
    """An optional header of printable ASCII, at most 255 characters."""
    value = request.headers.get(name)
    if value is None:
        return None
    if not _HEADER_VALUE.fullmatch(value):
        raise BadRequest(f"the {name} header is 1-255 printable ASCII characters",
                         errors=[{"field": name, "message": "1-255 printable ASCII characters, no edge spaces"}])
    return value
