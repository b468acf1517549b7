"""``manage.py sb_pause`` (issue 31): the CLI pauses and resumes through the same services."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.support import helpers
from workflows.models import AuditEvent

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("sb_pause", *args, stdout=out)
    return out.getvalue()


def test_the_cli_pauses_and_resumes_an_execution_and_the_workspace(workspace: Any) -> None:
    helpers.publish(workspace, "one", helpers.NOOP)
    execution = helpers.start(workspace, "one", {})
    assert _run(str(execution.pk)).startswith("paused; 0 step(s) in flight (drained)")
    assert "(unchanged)" in _run(str(execution.pk))
    assert helpers.claim() == []
    assert _run(str(execution.pk), "--resume").startswith("not paused")
    _run("--all")
    assert helpers.claim() == []
    _run("--all", "--resume")
    helpers.run_engine()
    assert helpers.refresh(execution).status == "SUCCEEDED"
    with pytest.raises(CommandError, match="already SUCCEEDED"):
        _run(str(execution.pk))
    with pytest.raises(CommandError, match="give an execution id or --all"):
        _run()
    assert AuditEvent.objects.filter(actor="cli:sb_pause", action="execution.pause").count() == 2
