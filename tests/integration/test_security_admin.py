"""The Django admin under S15 and workspace roles: reserved definitions are read-only for
everyone (superusers included, refusals audited), and staff users get what their
Membership's role allows, in their own workspaces only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.support import helpers
from tests.support.admin import DEFINITIONS, INLINE, add_definition
from tests.support.claims import last_audit, make_actor, publish_system
from tests.support.clients import staff
from workflows import signing
from workflows.access import create_token
from workflows.audit import record
from workflows.models import AuditEvent, Membership, Role, SystemActor, WorkflowDefinition

pytestmark = pytest.mark.django_db

# --- reserved definitions ---------------------------------------------------------------------

def test_a_superuser_cannot_create_a_reserved_definition_and_is_audited(workspace: Any) -> None:
    root = staff(workspace, None, "root", superuser=True)
    response = add_definition(root, workspace, "system.rollout")
    assert response.status_code == 200  # the form again, with the reason
    assert "reserved for system actors" in response.content.decode()
    assert not WorkflowDefinition.objects.filter(key="system.rollout").exists()
    refusal = last_audit("workflow.publish")
    assert refusal.actor == "user:root" and refusal.outcome == "refused"
    assert "reserved for system actors" in refusal.reason and refusal.detail == {"via": "admin"}


def test_a_reserved_definition_is_read_only_for_a_superuser(workspace: Any) -> None:
    definition = publish_system(workspace, "system.rollout", helpers.NOOP).definition
    root = staff(workspace, None, "root", superuser=True)
    page = root.get(f"{DEFINITIONS}{definition.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'name="dsl"' not in text and "reserved for system actors" in text and "signed claim" in text
    response = root.post(f"{DEFINITIONS}{definition.pk}/change/", {"dsl": json.dumps(helpers.FAIL_IF), **INLINE})
    assert response.status_code == 403
    refusal = last_audit("workflow.publish")
    assert (refusal.actor, refusal.target, refusal.outcome) == ("user:root", "system.rollout", "refused")
    assert "reserved for system actors" in refusal.reason
    assert root.post(f"{DEFINITIONS}{definition.pk}/delete/", {"post": "yes"}).status_code == 403
    assert definition.versions.count() == 1
    listing = root.get(DEFINITIONS).content.decode()
    assert "system.rollout" in listing


def test_a_superuser_publishes_ordinary_definitions_audited(workspace: Any) -> None:
    root = staff(workspace, None, "root", superuser=True)
    response = add_definition(root, workspace, "flow")
    assert response.status_code == 302, response.content[:500]
    definition = WorkflowDefinition.objects.get(key="flow")
    assert definition.current_version is not None and definition.current_version.author == "user:root"
    accepted = last_audit("workflow.publish")
    assert (accepted.actor, accepted.target, accepted.outcome) == ("user:root", "flow", "accepted")
    response = root.post(f"{DEFINITIONS}{definition.pk}/change/", {"dsl": json.dumps(helpers.FAIL_IF), **INLINE})
    assert response.status_code == 302
    assert definition.versions.count() == 2


def test_an_invalid_document_in_the_admin_is_refused_and_audited(workspace: Any) -> None:
    author = staff(workspace, Role.AUTHOR, "writer")
    response = add_definition(author, workspace, "flow", {"start": "nowhere", "vertices": {}})
    assert response.status_code == 200
    refusal = last_audit("workflow.publish")
    assert refusal.outcome == "refused" and "$.start" in refusal.reason


# --- roles --------------------------------------------------------------------------------------

def test_a_viewer_reads_but_cannot_publish(workspace: Any) -> None:
    definition = helpers.publish(workspace, "flow", helpers.NOOP).definition
    viewer = staff(workspace, Role.VIEWER, "watcher")
    assert viewer.get(DEFINITIONS).status_code == 200
    page = viewer.get(f"{DEFINITIONS}{definition.pk}/change/")
    assert page.status_code == 200 and 'name="dsl"' not in page.content.decode()
    assert viewer.get(f"{DEFINITIONS}add/").status_code == 403
    assert add_definition(viewer, workspace, "other").status_code == 403
    assert viewer.post(f"{DEFINITIONS}{definition.pk}/change/", {"dsl": "{}", **INLINE}).status_code == 403
    for page in ("/admin/workflows/apitoken/", "/admin/workflows/membership/", "/admin/workflows/auditevent/",
                 "/admin/workflows/systemactor/", "/admin/workflows/workspace/"):
        assert viewer.get(page).status_code == 403, page


def test_an_author_publishes_but_does_not_administer(workspace: Any) -> None:
    author = staff(workspace, Role.AUTHOR, "writer")
    assert add_definition(author, workspace, "flow").status_code == 302
    assert WorkflowDefinition.objects.get(key="flow").current_version.author == "user:writer"
    assert add_definition(author, workspace, "system.sneaky").status_code == 200
    assert not WorkflowDefinition.objects.filter(key="system.sneaky").exists()
    assert author.get("/admin/workflows/apitoken/").status_code == 403
    assert author.get("/admin/workflows/auditevent/").status_code == 403


def test_an_admin_manages_tokens_members_and_reads_the_audit_log_of_their_workspace(
        workspace: Any, other_workspace: Any) -> None:
    admin = staff(workspace, Role.ADMIN, "boss")
    mine, _ = create_token(workspace, name="mine-token", role="viewer")
    create_token(other_workspace, name="their-token", role="viewer")
    record("test", "something.mine", workspace=workspace)
    record("test", "something.theirs", workspace=other_workspace)
    tokens = admin.get("/admin/workflows/apitoken/").content.decode()
    assert "mine-token" in tokens and "their-token" not in tokens
    audit = admin.get("/admin/workflows/auditevent/").content.decode()
    assert "something.mine" in audit and "something.theirs" not in audit
    response = admin.post("/admin/workflows/apitoken/", {"action": "revoke", "_selected_action": [mine.pk]})
    assert response.status_code == 302
    mine.refresh_from_db()
    assert mine.revoked_at is not None and last_audit("token.revoke").actor == "user:boss"
    newcomer = get_user_model().objects.create_user("newcomer", password="pw")
    response = admin.post("/admin/workflows/membership/add/", {"user": newcomer.pk, "workspace": workspace.pk,
                                                               "role": "operator"})
    assert response.status_code == 302
    assert last_audit("member.add").target == "newcomer"
    response = admin.post("/admin/workflows/membership/add/", {"user": newcomer.pk, "workspace": other_workspace.pk,
                                                               "role": "admin"})
    assert response.status_code == 200  # not a choice: they administer only their own workspace
    assert not Membership.objects.filter(user=newcomer, workspace=other_workspace).exists()
    assert admin.get("/admin/workflows/workspace/").status_code == 403


def test_staff_see_only_their_own_workspaces(workspace: Any, other_workspace: Any) -> None:
    theirs = helpers.publish(other_workspace, "their-flow", helpers.NOOP).definition
    helpers.publish(workspace, "my-flow", helpers.NOOP)
    author = staff(workspace, Role.AUTHOR, "writer")
    listing = author.get(DEFINITIONS).content.decode()
    assert "my-flow" in listing and "their-flow" not in listing
    assert author.get(f"{DEFINITIONS}{theirs.pk}/change/").status_code == 302  # "does not exist": back to the list
    assert add_definition(author, other_workspace, "flow").status_code == 200  # not a workspace they may choose
    assert not WorkflowDefinition.objects.filter(workspace=other_workspace, key="flow").exists()


def test_staff_without_a_membership_see_nothing(workspace: Any) -> None:
    nobody = staff(workspace, None, "drifter")
    assert nobody.get(DEFINITIONS).status_code == 403
    index = nobody.get("/admin/")
    assert index.status_code == 200 and "/admin/workflows/" not in index.content.decode()


# --- system actors and the audit log ------------------------------------------------------------

def test_system_actors_are_listed_and_deactivated_by_superusers_only(workspace: Any) -> None:
    actor = make_actor("deployer", ("system.*",))
    root = staff(workspace, None, "root", superuser=True)
    listing = root.get("/admin/workflows/systemactor/").content.decode()
    assert "deployer" in listing and signing.fingerprint(actor.row.public_key) in listing
    assert root.get("/admin/workflows/systemactor/add/").status_code == 403
    page = root.get(f"/admin/workflows/systemactor/{actor.row.pk}/change/").content.decode()
    assert "PRIVATE" not in page and 'name="public_key"' not in page
    response = root.post("/admin/workflows/systemactor/", {"action": "deactivate",
                                                            "_selected_action": [actor.row.pk]})
    assert response.status_code == 302
    assert SystemActor.objects.get(pk=actor.row.pk).active is False
    assert last_audit("actor.deactivate").actor == "user:root"
    admin = staff(workspace, Role.ADMIN, "boss")
    assert admin.get("/admin/workflows/systemactor/").status_code == 403


def test_the_audit_log_is_browsable_with_filters_and_read_only(workspace: Any) -> None:
    record("token:ci", "workflow.publish", workspace=workspace, target="flow")
    record("token:ci", "workflow.publish", workspace=workspace, target="system.x", outcome="refused",
           reason="reserved")
    root = staff(workspace, None, "root", superuser=True)
    page = root.get("/admin/workflows/auditevent/?outcome__exact=refused").content.decode()
    assert "system.x" in page and ">flow<" not in page
    for name in ("outcome", "action", "workspace", "created at"):
        assert f'data-filter-title="{name}"' in page, name
    event = AuditEvent.objects.get(target="system.x")
    assert root.post(f"/admin/workflows/auditevent/{event.pk}/change/", {"reason": "x"}).status_code == 403
    assert root.post(f"/admin/workflows/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert root.get("/admin/workflows/auditevent/add/").status_code == 403


# --- django-q2's admin is read-only (issue 15, finding 1) ------------------------------------------

QUEUE_PAGES = ["/admin/django_q/schedule/", "/admin/django_q/success/", "/admin/django_q/failure/",
               "/admin/django_q/ormq/"]


def test_no_admin_page_creates_or_changes_django_q_schedules_or_tasks(workspace: Any) -> None:
    from django_q.models import Failure, Schedule, Success

    root = staff(workspace, None, "root", superuser=True)
    before = set(Schedule.objects.values_list("func", "name"))
    schedule = Schedule.objects.create(func="math.floor", args="1.5", name="existing")
    failure = Failure.objects.create(id="f" * 32, name="failed-task", func="math.floor", started="2026-01-01T00:00Z",
                                     stopped="2026-01-01T00:00Z", success=False, result="boom")
    for page in QUEUE_PAGES:
        listing = root.get(page)
        assert listing.status_code == 200, page  # a superuser may look
        assert b"action-select" not in listing.content and f"{page}add/".encode() not in listing.content, page
        assert root.get(f"{page}add/").status_code == 403, page
    response = root.post("/admin/django_q/schedule/add/", {"func": "os.system", "args": "'id'", "name": "pwn",
                                                            "schedule_type": "O", "repeats": "-1"})
    assert response.status_code == 403
    page = root.get(f"/admin/django_q/schedule/{schedule.pk}/change/")
    assert page.status_code == 200 and b'name="func"' not in page.content  # shown read-only, no form field
    response = root.post(f"/admin/django_q/schedule/{schedule.pk}/change/", {"func": "os.system", "name": "x"})
    assert response.status_code == 403
    assert root.post(f"/admin/django_q/schedule/{schedule.pk}/delete/", {"post": "yes"}).status_code == 403
    response = root.post("/admin/django_q/failure/", {"action": "resubmit_task", "_selected_action": [failure.pk]})
    assert response.status_code in (200, 302)
    assert set(Schedule.objects.values_list("func", "name")) == {*before, ("math.floor", "existing")}
    assert Failure.objects.filter(pk=failure.pk).exists()  # resubmitting would have deleted it
    assert not Success.objects.exists()
    assert root.get(f"/admin/django_q/failure/{failure.pk}/change/").status_code == 200  # read-only detail


def test_staff_without_superuser_do_not_see_the_task_queue(workspace: Any) -> None:
    boss = staff(workspace, Role.ADMIN, "boss")
    for page in QUEUE_PAGES:
        assert boss.get(page).status_code == 403, page
