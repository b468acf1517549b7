"""A commit's fan-out counts go to the accumulator it is given (state.FanoutCounts), and the
counter row is written only when the caller applies them — the drain does so last in its
commit transaction (executions/worker/commits.py), so the row every child's commit updates is
locked briefly. Without an accumulator a transition counts at once."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from executions.core import state
from executions.engine import runner as engine
from tests.support import helpers

pytestmark = pytest.mark.django_db


def succeeded_children() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT succeeded FROM executions_fanout")
        [(count,)] = cursor.fetchall()
        return int(count)


def children_claimed(workspace, items: int) -> list:
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    helpers.start(workspace, "parent", {"items": list(range(items))})
    [spawner] = helpers.claim_runs()
    helpers.commit([(spawner, engine.execute(spawner))])
    helpers.make_due()
    children = [run for run in helpers.claim_runs() if run.vertex.id == "t"]  # not the merge
    assert len(children) == items
    return children


def test_a_commit_given_an_accumulator_counts_its_children_when_the_caller_applies_them(workspace):
    children = children_claimed(workspace, 2)
    counts = state.FanoutCounts()
    with transaction.atomic(), connection.cursor() as cursor:
        engine.commit(cursor, [(run, engine.execute(run)) for run in children], counts=counts)
        assert succeeded_children() == 0, "counted in the accumulator, not yet on the row"
        counts.apply(cursor)
        assert succeeded_children() == 2
        counts.apply(cursor)
        assert succeeded_children() == 2, "applied once"


def test_a_commit_without_one_counts_at_once(workspace):
    children = children_claimed(workspace, 2)
    helpers.commit([(run, engine.execute(run)) for run in children])
    assert succeeded_children() == 2
