"""The MERGE rule has one home (executions/core/merge_rule.py) and the database evaluates it:
for many fan-out counts, the database's verdict is the documented rule (docs/dsl.md,
"MERGE"), and the API and the UI show exactly that verdict."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from executions.core import merge_rule
from executions.models import FanOut
from tests.support import helpers
from tests.support.clients import api, client_for
from workflows.models import Role

pytestmark = pytest.mark.django_db

VERDICT = f"""
    SELECT {merge_rule.FANOUT_DECIDED}, {merge_rule.FANOUT_EXCEEDED}, {merge_rule.FANOUT_FINISHED}
    FROM executions_fanout f WHERE f.step_id = %s
"""

OUTCOME = re.compile(r'id="outcome-fan" data-decided="(true|false)"\s+data-exceeded="(true|false)" '
                     r'data-finished="(true|false)">([^<]*)</p>')


@st.composite
def fanout_counts(draw: Any) -> dict[str, Any]:
    """A fan-out row's counters and merge settings: ended ≤ created ≤ total."""
    total = draw(st.integers(0, 40))
    created = draw(st.integers(0, total))
    succeeded = draw(st.integers(0, created))
    failed = draw(st.integers(0, created - succeeded))
    cancelled = draw(st.integers(0, created - succeeded - failed))
    ratio = draw(st.sampled_from([0.0, 0.05, 0.1, 0.29, 0.5, 1.0]))
    return {"total": total, "created": created, "spawn_complete": draw(st.booleans()), "succeeded": succeeded,
            "failed": failed, "cancelled": cancelled, "tolerates_failed": draw(st.booleans()),
            "tolerates_cancelled": draw(st.booleans()), "max_failure_ratio": ratio,
            "allowed_failures": merge_rule.allowed_failures(ratio, total), "fail_fast": draw(st.booleans())}


def documented(row: dict[str, Any]) -> tuple[bool, bool, bool]:
    """(decided, exceeded, finished) as docs/dsl.md states the rule, for comparison only."""
    tolerated = (row["failed"] if row["tolerates_failed"] else 0) + \
        (row["cancelled"] if row["tolerates_cancelled"] else 0)
    exceeded = row["failed"] + row["cancelled"] - tolerated > 0 or tolerated > row["allowed_failures"]
    finished = row["spawn_complete"] and row["succeeded"] + row["failed"] + row["cancelled"] >= row["total"]
    return finished or (row["fail_fast"] and exceeded), exceeded, finished


def test_the_api_and_the_ui_show_the_databases_merge_verdict(workspace):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    parent = helpers.start(workspace, "parent", {"items": [1]})
    helpers.run_engine()
    fan = FanOut.objects.get(execution=parent)
    client, browser = api(workspace, "viewer"), client_for(workspace, Role.VIEWER, "viewer")
    fragment = reverse("ui:execution-fanout", args=[parent.pk, "fan"])

    @settings(max_examples=100, deadline=None, derandomize=True, database=None)
    @given(fanout_counts())
    def check(row: dict[str, Any]) -> None:
        FanOut.objects.filter(pk=fan.pk).update(**row)
        with connection.cursor() as cursor:
            cursor.execute(VERDICT, [fan.pk])
            decided, exceeded, finished = cursor.fetchone()
        assert (decided, exceeded, finished) == documented(row)

        [shown] = client.get(f"/api/v1/executions/{parent.pk}").json()["fanouts"]
        assert (shown["decided"], shown["exceeded"], shown["finished"]) == (decided, exceeded, finished)
        assert shown["merge_state"] == merge_rule.explain(row)

        html = browser.get(fragment, HTTP_HX_REQUEST="true").content.decode()
        found = OUTCOME.search(html)
        assert found, html
        flags = tuple(value == "true" for value in found.group(1, 2, 3))
        assert flags == (decided, exceeded, finished)
        text = found.group(4)
        assert text.startswith("Decided") == decided
        assert ("the merge fails" in text) == (decided and exceeded)
        assert ("the merge succeeds" in text) == (decided and not exceeded)
        assert ("before every child ended" in text) == (decided and not finished)

    check()
