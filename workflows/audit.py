"""The audit log: every operator action (retry, cancel, limit change, publish) and every
system-actor claim, accepted or refused, with its reason.

``audited`` wraps a write so that the action and its audit row commit together, and a
refusal is recorded even though the refused action rolled back::

    with audited(principal, "execution.cancel", target=str(execution.pk)):
        services.cancel_execution(execution, actor=principal.label)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from workflows.models import AuditEvent, Workspace


def record(actor: str, action: str, *, workspace: Workspace | None = None, target: str = "",
           outcome: str = AuditEvent.Outcome.ACCEPTED, reason: str = "", detail: dict[str, Any] | None = None) -> None:
    AuditEvent.objects.create(workspace=workspace, actor=actor, action=action, target=target[:300],
                              outcome=outcome, reason=reason, detail=detail or {})


@contextlib.contextmanager
def audited(principal: Any, action: str, *, target: str = "", detail: dict[str, Any] | None = None) -> Iterator[None]:
    """Run the body and its ACCEPTED audit row in one transaction; on an exception, record
    a REFUSED row (with the error as reason) in its own transaction and re-raise."""
    try:
        with transaction.atomic():
            yield
            record(principal.label, action, workspace=principal.workspace, target=target, detail=detail)
    except Exception as error:
        reason = getattr(error, "message", None) or str(error) or type(error).__name__
        record(principal.label, action, workspace=principal.workspace, target=target,
               outcome=AuditEvent.Outcome.REFUSED, reason=reason, detail=detail)
        raise
