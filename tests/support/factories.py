"""Rows the tests stand on — plans, workspaces, users and their memberships — built with
factory-boy. Workspaces are got-or-created by slug (a transactional test's flush removes
the migration's default workspace; the next test re-creates it)."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory, Password

from workflows.models import Membership, Plan, Workspace

PASSWORD = "pw"


class PlanFactory(DjangoModelFactory):
    class Meta:
        model = Plan
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"plan-{n}")
    executions_per_day = 1_000_000


class WorkspaceFactory(DjangoModelFactory):
    class Meta:
        model = Workspace
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"workspace-{n}")
    name = factory.SelfAttribute("slug")
    plan = factory.SubFactory(PlanFactory, name=factory.LazyAttribute(lambda plan: f"plan-{plan.factory_parent.slug}"))


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user-{n}")
    password = Password(PASSWORD)


class MembershipFactory(DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    workspace = factory.SubFactory(WorkspaceFactory)


def default_workspace() -> Workspace:
    """The migration's default workspace (re-created after a transactional test's flush)."""
    return WorkspaceFactory(slug="default", name="Default workspace", plan__name="default",
                            plan__executions_per_day=5_000_000)


def make_workspace(slug: str, *, quota: int = 1_000_000) -> Workspace:
    return WorkspaceFactory(slug=slug, plan__executions_per_day=quota)


def member(workspace: Workspace, role: str | None, name: str | None = None, **fields: Any) -> Any:
    """A new user (password ``pw`` unless given); with a role, a member of ``workspace`` with it."""
    user = UserFactory(**fields) if name is None else UserFactory(username=name, **fields)
    if role is not None:
        MembershipFactory(user=user, workspace=workspace, role=role)
    return user
