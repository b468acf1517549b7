"""Publishing versions (S14): idempotent, race-free, immutable in the database."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from tests.support import factories
from tests.support.threads import race
from workflows import dsl
from workflows.models import WorkflowDefinition, WorkflowVersion
from workflows.services import publish_version

DOC = {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "demo.echo"}}}
OTHER = {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "demo.noop"}}}


@pytest.mark.django_db
def test_publish_is_idempotent_and_moves_the_current_pointer(workspace):
    first = publish_version(workspace, "wf", DOC)
    again = publish_version(workspace, "wf", json.loads(json.dumps(DOC, indent=4)))
    assert first.created and not again.created
    assert first.version.pk == again.version.pk
    assert first.version.hash == dsl.content_hash(DOC)

    second = publish_version(workspace, "wf", OTHER)
    definition = WorkflowDefinition.objects.get(workspace=workspace, key="wf")
    assert second.created and definition.current_version_id == second.version.pk

    rollback = publish_version(workspace, "wf", DOC)
    definition.refresh_from_db()
    assert not rollback.created and definition.current_version_id == first.version.pk
    assert WorkflowVersion.objects.filter(definition=definition).count() == 2


@pytest.mark.django_db
def test_an_invalid_document_writes_nothing_and_reports_every_error(workspace):
    bad = {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "no.such_handler", "next": "zzz"}}}
    with pytest.raises(dsl.DslError) as raised:
        publish_version(workspace, "broken", bad)
    assert ("$.vertices.a.next", "names no vertex: 'zzz'") in raised.value.errors
    assert not WorkflowDefinition.objects.filter(key="broken").exists()

    with pytest.raises(dsl.DslError) as raised:
        publish_version(workspace, "broken", {"start": "a", "vertices": {"a": {"type": "TASK", "handler": "no.such"}}})
    assert raised.value.errors == [("$.vertices.a.handler", "no TASK handler is registered as 'no.such'")]
    assert not WorkflowDefinition.objects.filter(key="broken").exists()


@pytest.mark.django_db
def test_a_version_cannot_be_updated_even_from_raw_sql(workspace):
    version = publish_version(workspace, "wf", DOC).version
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE workflows_workflowversion SET canonical = '{}' WHERE id = %s", [version.pk])
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        WorkflowVersion.objects.filter(pk=version.pk).update(author="mallory")
    version.refresh_from_db()
    assert version.hash == dsl.content_hash(DOC) and version.author == ""


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_publishes_create_one_version():
    workspace = factories.default_workspace()

    def publish() -> Any:
        return publish_version(workspace, "raced", DOC)

    results = race(*[publish] * 6)  # any error in a thread is raised here
    assert len({r.version.pk for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert WorkflowVersion.objects.filter(definition__key="raced").count() == 1


@pytest.mark.django_db
def test_sb_publish_command_prints_the_hash_and_fails_with_every_error(workspace, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(DOC))
    out = io.StringIO()
    call_command("sb_publish", "cli-wf", str(good), stdout=out, stderr=io.StringIO())
    assert out.getvalue().strip() == dsl.content_hash(DOC)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"start": "x", "vertices": {"a": {"type": "NOPE"}}}))
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing published"):
        call_command("sb_publish", "cli-bad", str(bad), stdout=io.StringIO(), stderr=err)
    assert "$.vertices.a.type: unknown vertex type 'NOPE'" in err.getvalue()
    assert "$.start: names no vertex: 'x'" in err.getvalue()
    assert not WorkflowDefinition.objects.filter(key="cli-bad").exists()
