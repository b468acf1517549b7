"""Waiting for the outside world (S27): the anonymous callback endpoints (the token is the
credential), an operator's completion of a waiting callback step and its token, and events.

The callback endpoints follow the anonymous-edge rules (docs/security.md): the body is capped
(``SB_CALLBACK_MAX_BYTES``) before anything parses it; a token that names nothing is counted
per source address and, past ``SB_AUTH_FAILURES_LIMIT`` in the window, the address gets 429
before any look-up; nothing else is written for a request that completes nothing.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from executions import selectors
from executions.api import wait_serializers as w
from executions.api.schema import problems
from executions.api.views.base import ApiView, acting, body, read_body, writes
from executions.core.waits import Answer
from executions.services import lifecycle
from executions.services import waits as services
from workflows import logins
from workflows.errors import NotFound
from workflows.models import Role

TAG = ["callbacks"]
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,100}")
SCOPE = "callback"  # the throttle's scope (workflows/logins.py): failed look-ups per source address
LIMIT = "CALLBACK_MAX_BYTES"
CALLBACK_PROBLEMS = problems(
    s404="No such callback token.", s409="Completed before with a different result.",
    s410="Its step timed out, was cancelled or was retried: the token is revoked.",
    s413="The body is larger than SB_CALLBACK_MAX_BYTES.",
    s429="Too many unknown tokens from this address.")


def _result(answer: Answer) -> Response:
    return Response(w.CompletionResult({**answer.completion, "changed": answer.changed}).data)


class _Anonymous(ApiView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)  # negotiation; no authentication, no claim
        over = logins.blocked(request, SCOPE)
        if over is not None:
            raise exceptions.Throttled(wait=over.seconds_left, detail=f"too many unknown callback tokens from this "
                                                                      f"address ({over.hits}); SB_AUTH_FAILURES_LIMIT")
        read_body(request, int(settings.SB[LIMIT]), LIMIT)

    def looked_up(self, request: Request, token: str, work: Any) -> Any:
        """``work()``; a token that names nothing is counted against the source address."""
        try:
            if not TOKEN.fullmatch(token):
                raise NotFound("no such callback token")
            return work()
        except NotFound:
            logins.failed(request, SCOPE)
            raise


class Callback(_Anonymous):
    @extend_schema(operation_id="complete_callback", tags=TAG, request=w.Completion, auth=[],
                   description="Complete the step waiting for this callback: `{\"status\": \"SUCCEEDED\", "
                               "\"output\": …}` (its output becomes the step's) or `{\"status\": \"FAILED\", "
                               "\"error\": \"…\"}` (the step's retry policy applies; a retry issues a new "
                               "token). No API token: the callback token is the credential. The same "
                               "completion again answers 200 with `changed` false.",
                   responses={200: w.CompletionResult, **CALLBACK_PROBLEMS})
    def post(self, request: Request, token: str) -> Response:
        data = body(w.Completion, request)
        done = services.completion(data["status"], data.get("output"), data.get("error"))
        return _result(self.looked_up(request, token, lambda: services.complete_callback(token, done)))


class CallbackHeartbeat(_Anonymous):
    @extend_schema(operation_id="callback_heartbeat", tags=TAG, request=None, auth=[],
                   description="The waiting step's caller is still at work: its heartbeat deadline moves to "
                               "now + heartbeatSeconds (never past its timeout).",
                   responses={200: w.HeartbeatResult, **CALLBACK_PROBLEMS})
    def post(self, request: Request, token: str) -> Response:
        extended = self.looked_up(request, token, lambda: services.heartbeat(token))
        return Response(w.HeartbeatResult({"times_out_at": extended["timesOutAt"],
                                           "heartbeat_due_at": extended["heartbeatDueAt"]}).data)


class StepCallback(ApiView):
    @extend_schema(operation_id="get_step_callback", tags=["executions"],
                   description="The callback URL and token of a step waiting for a callback (operator role: "
                               "whoever holds the token can complete the step).",
                   responses={200: w.StepCallback, **problems(s404="The step does not wait for a callback.")})
    def get(self, request: Request, id: uuid.UUID, vertex: str) -> Response:
        self.principal.require(Role.OPERATOR, "read callback tokens")
        execution = selectors.executions.get(self.principal.workspace, id)
        found = selectors.waits.callback(execution, vertex)
        if found is None:
            raise NotFound(f"step '{vertex}' does not wait for a callback")
        return Response(w.StepCallback(found).data)


class CompleteStep(ApiView):
    @extend_schema(operation_id="complete_step", tags=["executions"], request=w.Completion,
                   description="Complete (or fail) a step WAITING for a callback, as the callback would — "
                               "an approval. Operator role; audited.",
                   responses={200: w.CompletionResult, **problems(s409="The step does not wait for a callback, "
                                                                       "or was completed differently.")})
    @writes("step.complete", Role.OPERATOR, "complete steps", target="{id}/{vertex}")
    def post(self, request: Request, id: uuid.UUID, vertex: str) -> Response:
        data = body(w.Completion, request)
        done = services.completion(data["status"], data.get("output"), data.get("error"))
        principal = self.principal
        with acting(principal, "step.complete", Role.OPERATOR, target=f"{id}/{vertex}", what="complete steps",
                    detail={"status": data["status"]}):
            answer = services.complete_step(lifecycle.get_execution(principal.workspace, id), vertex, done,
                                            actor=principal.label, system_actor=principal.system_actor)
        return _result(answer)


class PostEvent(ApiView):
    @extend_schema(operation_id="post_event", tags=["events"], request=w.PostEvent,
                   description="Deliver an event to every step of this workspace waiting for it (a WAIT "
                               "`\"for\": \"event\"` whose `match` it satisfies), in one statement. With `id`, "
                               "delivery is idempotent. Events are kept for SB_EVENT_RETENTION_SECONDS for "
                               "waits with `lookbackSeconds`.",
                   responses={200: w.Delivered, **problems(s409="The id was used for a different event.")})
    @writes("event.post", Role.OPERATOR, "post events")
    def post(self, request: Request) -> Response:
        data = body(w.PostEvent, request)
        delivered = services.post_event(self.principal.workspace.pk, data["name"], data.get("data"), data.get("id"))
        return Response(w.Delivered({"delivered": delivered}).data)
