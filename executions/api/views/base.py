"""What every API view shares: the principal, role checks inside the audit record, and
strict parsing of bodies, query parameters and headers."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, cast

from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from executions.api import auth
from executions.api.errors import BadRequest
from workflows.access import Principal
from workflows.audit import audited

_HEADER_VALUE = re.compile(r"[!-~](?:[ -~]{0,253}[!-~])?")


class ApiView(APIView):
    @property
    def principal(self) -> Principal:
        return cast(Principal, self.request.user)

    def perform_authentication(self, request: Request) -> None:
        """Authenticate, then verify a system actor's claim if the request carries one."""
        try:
            super().perform_authentication(request)
        except exceptions.APIException as error:
            auth.record_refused_credentials(request, error)
            raise
        auth.apply_claim(request)


@contextlib.contextmanager
def acting(principal: Principal, action: str, role: str, *, target: str, what: str) -> Iterator[None]:
    """Run a write as ``principal``: the role check and the write share one audit record,
    so a refused attempt (wrong role, unknown id, conflict) is logged with its reason."""
    with audited(principal, action, target=target):
        principal.require(role, what)
        yield


def body(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    # A plain dict: DRF reads an absent boolean in a QueryDict as false, not as absent.
    serializer = serializer_class(data=request.query_params.dict())
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
