"""Issue 30: the claim is fair — across workspaces by plan weight (however a workspace splits
its work), across the root executions of a workspace, and by priority with aging inside a
workspace — and work-conserving. The claim is called as a drain calls it (leases.claim in a
transaction of its own); ready work is filled in SQL, the shape a fan-out leaves."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest
from django.db import connection

from executions.models import Step
from tests.support import factories, helpers
from tests.support.ready import fill


def weighted(slug: str, weight: int) -> Any:
    workspace = factories.make_workspace(slug)
    workspace.plan.weight = weight
    workspace.plan.save(update_fields=["weight"])
    return workspace


def claims(times: int, limit: int) -> list[Any]:
    """Claim ``times`` batches of ``limit``; the steps claimed."""
    taken = []
    for _ in range(times):
        taken += helpers.claim(limit)
    return taken


def by(column: str, claimed: list[Any]) -> Counter:
    ids = [c.step_id for c in claimed]
    return Counter(Step.objects.filter(id__in=ids).values_list(column, flat=True))


def test_weights_one_and_three_divide_the_claims_one_to_three(db):
    light, heavy = weighted("light", 1), weighted("heavy", 3)
    fill(light, 2_000)
    fill(heavy, 2_000)
    counts = by("workspace_id", claims(10, 40))
    assert counts[light.id] + counts[heavy.id] == 400
    assert counts[light.id] == 100 and counts[heavy.id] == 300, counts


def test_the_weights_hold_one_step_at_a_time(db):
    """Claims of one step each: the credit carried between claims keeps the proportion exact."""
    light, heavy = weighted("light", 1), weighted("heavy", 3)
    fill(light, 100)
    fill(heavy, 100)
    counts = by("workspace_id", claims(40, 1))
    assert counts[light.id] == 10 and counts[heavy.id] == 30, counts


def test_sharding_work_over_many_roots_does_not_enlarge_a_workspaces_share(db):
    one, many = weighted("one-root", 1), weighted("many-roots", 1)
    fill(one, 2_000, roots=1)
    fill(many, 2_000, roots=50)
    counts = by("workspace_id", claims(10, 40))
    assert counts[one.id] == 200 and counts[many.id] == 200, counts


def test_a_workspace_alone_takes_every_claim(db):
    alone = weighted("alone", 1)
    weighted("idle", 3)  # has nothing ready: it takes nothing from the one that has
    fill(alone, 500, roots=3)
    assert len(claims(4, 100)) == 400


def test_an_idle_workspaces_share_goes_to_the_busy_one(db):
    """Work-conserving under contention: a workspace with a little work takes it, the rest goes
    to the other."""
    busy, small = weighted("busy", 1), weighted("small", 3)
    fill(busy, 1_000)
    fill(small, 5)
    counts = by("workspace_id", helpers.claim(100))
    assert counts == {small.id: 5, busy.id: 95}


def test_a_small_root_started_after_a_huge_one_starts_within_a_claim(db):
    workspace = weighted("ws", 1)
    fill(workspace, 5_000, roots=1, age=30)
    [small] = fill(workspace, 5, roots=1)
    counts = by("root_id", helpers.claim(20))
    assert counts[small] == 5 and sum(counts.values()) == 20, counts


def test_roots_of_a_workspace_share_its_claims_equally(db):
    workspace = weighted("ws", 1)
    roots = fill(workspace, 3_000, roots=3)
    counts = by("root_id", claims(5, 30))
    assert set(counts) == roots and set(counts.values()) == {50}, counts


def test_a_higher_priority_is_claimed_first_within_a_workspace(db):
    workspace = weighted("ws", 1)
    [low] = fill(workspace, 100, priority=5, age=30)
    [high] = fill(workspace, 100, priority=1)
    counts = by("root_id", helpers.claim(50))
    assert counts == {high: 50}, (counts, low)


def test_aging_moves_priority_five(db):
    """Waiting four intervals of SB_PRIORITY_AGING_SECONDS (60 s) lifts priority 5 to 1: it
    goes before fresh priority 3 work."""
    workspace = weighted("ws", 1)
    [fresh] = fill(workspace, 100, priority=3)
    [aged] = fill(workspace, 100, priority=5, age=250)
    counts = by("root_id", helpers.claim(50))
    assert counts == {aged: 50}, (counts, fresh)


def test_priority_is_strict_only_within_a_workspace(db):
    """Another workspace's priority 1 does not take this workspace's share."""
    first, second = weighted("first", 1), weighted("second", 1)
    fill(first, 500, priority=1)
    fill(second, 500, priority=5)
    counts = by("workspace_id", helpers.claim(100))
    assert counts == {first.id: 50, second.id: 50}


def test_priority_five_that_waited_less_than_needed_stays_behind(db):
    """100 s of waiting lifts priority 5 one level (to 4): still behind fresh priority 3."""
    workspace = weighted("ws", 1)
    [fresh] = fill(workspace, 100, priority=3)
    [older] = fill(workspace, 100, priority=5, age=100)
    counts = by("root_id", helpers.claim(50))
    assert counts == {fresh: 50}, (counts, older)


@pytest.mark.django_db(transaction=True)
def test_a_claim_does_not_wait_for_another_claimer_holding_the_scheduler_state(transactional_db):
    """The clock row is taken SKIP LOCKED: a claimer that finds it held claims anyway, from the
    state as it is (so it does not carry its own rounding over: 6 and 4 may come where the
    holder would divide 5 and 5), and leaves the state to the holder."""
    first, second = weighted("first", 1), weighted("second", 1)
    fill(first, 100)
    fill(second, 100)
    assert by("workspace_id", helpers.claim(2)) == {first.id: 1, second.id: 1}  # and the clock row exists
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT 1 FROM executions_fairclock WHERE id = 1 FOR UPDATE")
        counts = by("workspace_id", helpers.claim(10))
        other.rollback()
    assert sum(counts.values()) == 10 and min(counts[first.id], counts[second.id]) >= 4, counts


# A root's own step (depth 0, a MERGE woken by its children, say) and a child's step (depth 1),
# due at the same instant — as one commit makes them: written in either order, the heap puts
# them in either order, and the claim must not depend on it.
TWIN = """
    INSERT INTO executions_step (execution_id, vertex, attempt, max_attempts, due_at, wait_reason, state, error,
                                 lease_expiries, created_at, workspace_id, root_id, priority, depth)
    SELECT e.id, %(vertex)s, 1, 1, s.due_at, '', '{}', '', 0, now(), e.workspace_id, e.root_id, e.priority, e.depth
    FROM executions_execution e, executions_step s WHERE e.id = %(execution)s AND s.id = %(like)s
    RETURNING id
"""


@pytest.mark.parametrize("root_step_written", ["first", "last"])
def test_among_steps_due_at_once_a_roots_deeper_work_comes_first(db, root_step_written):
    """Ties of due time within a root go to the deeper execution's step (a child before the
    ancestor's merge woken in the same commit), whatever the heap order of the rows."""
    workspace = weighted("ws", 1)
    [root] = fill(workspace, 1, roots=1)
    child_step = Step.objects.get(root_id=root)
    with connection.cursor() as cursor:
        if root_step_written == "first":  # the root's row before the child's in the heap
            cursor.execute(TWIN, {"vertex": "join", "execution": root, "like": child_step.id})
            cursor.execute(TWIN, {"vertex": "next", "execution": child_step.execution_id, "like": child_step.id})
            Step.objects.filter(pk=child_step.pk).delete()
        else:
            cursor.execute(TWIN, {"vertex": "join", "execution": root, "like": child_step.id})
    [first] = helpers.claim(1)
    assert Step.objects.get(pk=first.step_id).execution_id != root, "the child's step first"
    assert [Step.objects.get(pk=c.step_id).execution_id for c in helpers.claim(1)] == [root]
