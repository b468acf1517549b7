"""The read layer's execution lookups: one execution within a workspace, and lineage — an
execution's ancestors and its nearest cancelled ancestor are one recursive query however
deep it sits, so the API and UI pay the same for a deep child as for a shallow one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from executions import selectors
from executions.models import Execution
from executions.services import lifecycle as services
from tests.support import helpers
from tests.support.clients import api, client_for
from workflows.errors import NotFound
from workflows.models import Role

pytestmark = pytest.mark.django_db

# level0 → level1 → level2 → leaf, one child at each level. level1 waits on a timer after
# its merge, so it stays open once everything below it has succeeded.
LEVEL1 = {"start": "fan", "vertices": {
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "level2", "itemInput": {"items": "$.item"},
            "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "wait"},
    "wait": {"type": "TIMER", "seconds": 3600, "next": "done"},
    "done": {"type": "SUCCEED"}}}


def _chain(workspace: Any) -> list[Execution]:
    """[level0, level1, level2, leaf], run until level1 waits on its timer."""
    helpers.publish(workspace, "leaf", helpers.NOOP)
    helpers.publish(workspace, "level2", helpers.fanout_doc("leaf"))
    helpers.publish(workspace, "level1", LEVEL1)
    helpers.publish(workspace, "level0", helpers.fanout_doc("level1", items="$.input.groups",
                                                            item_input={"items": "$.item"}))
    chain = [helpers.start(workspace, "level0", {"groups": [[[1]]]})]
    helpers.run_engine()
    for _ in range(3):
        chain.append(Execution.objects.get(parent=chain[-1]))
    return chain


def test_get_finds_an_execution_only_in_its_workspace_and_only_by_a_valid_id(workspace, other_workspace):
    helpers.publish(workspace, "noop", helpers.NOOP)
    execution = helpers.start(workspace, "noop", {})
    found = selectors.executions.get(workspace, execution.pk, with_counts=True)
    assert found.pk == execution.pk and found.counts is None
    assert found.workflow.key == "noop" and found.version.hash == execution.version.hash
    for bad_workspace, bad_id in [(other_workspace, execution.pk), (workspace, "not-a-uuid"), (workspace, 42),
                                  (workspace, "00000000-0000-0000-0000-00000000000g")]:
        with pytest.raises(NotFound):
            selectors.executions.get(bad_workspace, bad_id)


def _queries(call: Any) -> tuple[Any, int]:
    with CaptureQueriesContext(connection) as captured:
        result = call()
    return result, len(captured)


def test_ancestors_are_root_first_with_their_workflows_in_one_query(workspace):
    level0, level1, level2, leaf = _chain(workspace)
    found, queries = _queries(lambda: selectors.executions.ancestors(leaf.pk))
    assert queries == 1
    assert [a.pk for a in found] == [level0.pk, level1.pk, level2.pk]
    _, more = _queries(lambda: [a.workflow.key for a in found])
    assert [a.workflow.key for a in found] == ["level0", "level1", "level2"] and more == 0
    assert [a.pk for a in selectors.executions.ancestors(level1.pk)] == [level0.pk]
    assert selectors.executions.ancestors(level0.pk) == []
    top, none = _queries(lambda: selectors.executions.lineage(level0))
    assert top == [] and none == 0  # a top-level execution needs no query


def test_cancelled_ancestor_is_found_above_a_finished_parent_in_one_query(workspace):
    level0, level1, level2, leaf = _chain(workspace)
    assert helpers.refresh(level2).status == "SUCCEEDED" and helpers.refresh(level1).status == "RUNNING"
    assert selectors.executions.cancelled_ancestor(leaf.pk) is None
    services.cancel_execution(level1)
    found, queries = _queries(lambda: selectors.executions.cancelled_ancestor(leaf.pk))
    assert found == level1.pk and queries == 1
    assert selectors.executions.cancelled_ancestor(level2.pk) == level1.pk
    assert selectors.executions.cancelled_ancestor(level1.pk) is None  # itself is not its ancestor
    assert selectors.executions.cancelled_ancestor(level0.pk) is None


def test_a_deep_child_costs_the_api_and_the_ui_what_a_shallow_one_does(workspace):
    *_, deep = _chain(workspace)
    helpers.publish(workspace, "shallow", helpers.fanout_doc("leaf"))
    parent = helpers.start(workspace, "shallow", {"items": [1]})
    helpers.run_engine()
    shallow = Execution.objects.get(parent=parent)
    assert (deep.depth, shallow.depth) == (3, 1)
    client, browser = api(workspace, "viewer"), client_for(workspace, Role.VIEWER, "viewer")

    def cost(url: str, client: Any, **headers: Any) -> int:
        client.get(url, **headers)  # warm caches (sessions, tokens)
        response, queries = _queries(lambda: client.get(url, **headers))
        assert response.status_code in (200, 286), response.content[:500]
        return queries

    for execution in (deep, shallow):
        assert len(client.get(f"/api/v1/executions/{execution.pk}").json()["lineage"]) == execution.depth
    assert cost(f"/api/v1/executions/{deep.pk}", client) == cost(f"/api/v1/executions/{shallow.pk}", client)
    for name in ("execution-header", "execution-detail"):
        urls = [reverse(f"ui:{name}", args=[e.pk]) for e in (deep, shallow)]
        assert cost(urls[0], browser, HTTP_HX_REQUEST="true") == cost(urls[1], browser, HTTP_HX_REQUEST="true"), name
