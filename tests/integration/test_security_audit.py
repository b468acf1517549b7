"""Rows that must not change, enforced by PostgreSQL even against raw SQL: audit events
(no UPDATE, no DELETE), system actors (name, key and patterns fixed; never deleted; never
re-activated) and spent nonces (unique)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, ProgrammingError, connection, transaction

from tests.support.claims import make_actor
from workflows import actors, signing
from workflows.audit import record
from workflows.management.commands.sb_actor import actor_admin
from workflows.models import AuditEvent, ClaimNonce, SystemActor

pytestmark = pytest.mark.django_db


def refused(sql: str, params: list[Any], message: str) -> None:
    with pytest.raises(IntegrityError, match=message), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.fixture
def event(workspace: Any) -> AuditEvent:
    record("token:ci", "execution.cancel", workspace=workspace, target="x", outcome="refused", reason="no")
    return AuditEvent.objects.get()


@pytest.mark.parametrize("sql", [
    "UPDATE workflows_auditevent SET outcome = 'accepted', reason = '' WHERE id = %s",
    "UPDATE workflows_auditevent SET actor = actor WHERE id = %s",  # even a no-op rewrite
    "DELETE FROM workflows_auditevent WHERE id = %s",
])
def test_raw_sql_cannot_change_or_delete_audit_rows(event: AuditEvent, sql: str) -> None:
    refused(sql, [event.pk], "workflows_auditevent rows are immutable")
    assert AuditEvent.objects.values_list("outcome", "reason").get(pk=event.pk) == ("refused", "no")


def test_the_orm_cannot_change_or_delete_audit_rows_either(event: AuditEvent) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(reason="tidied up")
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get(pk=event.pk).reason == "no"


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE workflows_systemactor SET public_key = %(other)s WHERE id = %(id)s", "never change"),
    ("UPDATE workflows_systemactor SET patterns = '[\"*\"]'::jsonb WHERE id = %(id)s", "never change"),
    ("UPDATE workflows_systemactor SET name = 'root' WHERE id = %(id)s", "never change"),
    ("DELETE FROM workflows_systemactor WHERE id = %(id)s", "never deleted"),
])
def test_a_registered_key_stays_what_it_was(workspace: Any, sql: str, message: str) -> None:
    actor = make_actor("deployer", ("system.deploy.*",))
    other = signing.public_text(signing.new_private_key())
    with pytest.raises(IntegrityError, match=message), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, {"id": actor.row.pk, "other": other})
    stored = SystemActor.objects.get(pk=actor.row.pk)
    assert (stored.name, stored.public_key, stored.patterns) == ("deployer", actor.row.public_key,
                                                                 ["system.deploy.*"])


def test_a_deactivated_actor_stays_deactivated(workspace: Any) -> None:
    actor = make_actor("deployer")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE workflows_systemactor SET active = false, deactivated_at = now() WHERE id = %s",
                       [actor.row.pk])
    refused("UPDATE workflows_systemactor SET active = true WHERE id = %s", [actor.row.pk], "stays deactivated")


def test_one_active_key_per_actor_name(workspace: Any) -> None:
    make_actor("deployer")
    with pytest.raises(IntegrityError, match="system_actor_one_active_key"), actor_admin():
        SystemActor.objects.create(name="deployer", public_key=signing.public_text(signing.new_private_key()),
                                   patterns=["system.*"])


def test_a_nonce_is_spent_once(workspace: Any) -> None:
    actor = make_actor("deployer")
    sql = ("INSERT INTO workflows_claimnonce (nonce, actor_id, claimed_at, created_at) "
           "VALUES ('nonce-0123456789ab', %s, now(), now())")
    with connection.cursor() as cursor:
        cursor.execute(sql, [actor.row.pk])
    refused(sql, [actor.row.pk], "claim_nonce_unique")
    assert ClaimNonce.objects.count() == 1


# --- only manage.py sb_actor registers actors (issue 15, finding 1) ----------------------------

def test_the_database_refuses_a_system_actor_inserted_outside_sb_actor(workspace: Any) -> None:
    public_key = signing.public_text(signing.new_private_key())
    with pytest.raises(ProgrammingError, match=r"only with manage\.py sb_actor"), transaction.atomic():
        SystemActor.objects.create(name="me", public_key=public_key, patterns=["system.*"])
    with pytest.raises(ProgrammingError, match=r"only with manage\.py sb_actor"), transaction.atomic(), \
            connection.cursor() as cursor:
        cursor.execute("INSERT INTO workflows_systemactor (name, public_key, patterns, active, created_by, "
                       "created_at) VALUES ('me', %s, '[\"system.*\"]', true, '', now())", [public_key])
    with pytest.raises(actors.ActorError, match=r"only with manage\.py sb_actor"):
        actors.register("me", public_key, ["system.*"], by="user:root")  # what a shell or the admin could call
    assert not SystemActor.objects.exists()
    assert not AuditEvent.objects.filter(action="actor.register").exists()


def test_the_flag_of_sb_actor_does_not_outlive_its_block(workspace: Any) -> None:
    with actor_admin():
        actors.register("deployer", signing.public_text(signing.new_private_key()), ["system.*"], by="test")
    with pytest.raises(actors.ActorError, match=r"only with manage\.py sb_actor"):
        actors.rotate("deployer", signing.public_text(signing.new_private_key()), by="user:root")
    assert SystemActor.objects.filter(active=True).count() == 1
