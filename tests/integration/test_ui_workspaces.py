"""A user in several workspaces chooses which one the browser session acts in."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support import helpers
from tests.support.clients import client_for
from workflows.models import Membership, Role

pytestmark = pytest.mark.django_db


def test_a_member_of_two_workspaces_switches_and_sees_only_the_chosen_ones_data(workspace, other_workspace):
    client = client_for(workspace, Role.VIEWER, "both")
    Membership.objects.create(user=Membership.objects.get(user__username="both").user, workspace=other_workspace,
                              role=Role.OPERATOR)
    helpers.publish(workspace, "noop", helpers.NOOP)
    helpers.publish(other_workspace, "noop", helpers.NOOP)
    mine, theirs = helpers.start(workspace, "noop", {}), helpers.start(other_workspace, "noop", {})

    page = client.get(reverse("ui:execution-list")).content.decode()
    assert str(mine.pk) in page and str(theirs.pk) not in page
    assert '<option value="other"' in page, "a member of two workspaces is offered the switch"

    response = client.post(reverse("ui:switch-workspace"), {"workspace": "other"})
    assert response.status_code == 302
    page = client.get(reverse("ui:execution-list")).content.decode()
    assert str(theirs.pk) in page and str(mine.pk) not in page
    assert client.get(reverse("ui:execution-detail", args=[mine.pk])).status_code == 404
    assert client.get(f"/api/v1/executions/{theirs.pk}").status_code == 200, "the API session follows the choice"
    assert client.get(f"/api/v1/executions/{mine.pk}").status_code == 404


def test_switching_to_a_workspace_one_is_not_a_member_of_is_refused(workspace, other_workspace):
    client = client_for(workspace, Role.OPERATOR, "one")
    response = client.post(reverse("ui:switch-workspace"), {"workspace": other_workspace.slug})
    assert response.status_code == 404
    assert "not a member of a workspace called" in response.content.decode()
    assert client.get(reverse("ui:switch-workspace")).status_code == 405
