"""The execution list's fan-out health and total (issue 33 §4): read from the fan-out counters
in a constant number of queries — one more parent, or more children, costs no query and no
scan of children — and the rows' poll answers 204 while nothing changed."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from executions import selectors
from executions.selectors.executions import ListFilters
from tests.support import helpers
from tests.support.clients import client_for, text
from workflows.models import Role

pytestmark = pytest.mark.django_db

TOLERANT = {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.1}}


def _queries(client, url: str) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return len(captured), [q["sql"] for q in captured.captured_queries]


def test_the_list_costs_the_same_queries_for_one_parent_or_many(workspace):
    client = client_for(workspace, Role.VIEWER)
    helpers.run_fanout(workspace, 10, failing={1}, merge_config=TOLERANT)
    one, _ = _queries(client, reverse("ui:execution-list"))
    for _ in range(3):
        helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i < 4} for i in range(30)]})
    helpers.run_engine()
    many, sql = _queries(client, reverse("ui:execution-list"))
    assert many == one
    # No query of the list reads the children of a parent (only the fan-out counters).
    assert not [q for q in sql if "parent_id" in q and "= ANY" in q]
    page = re.sub(r"<[^>]+>", "", text(client.get(reverse("ui:execution-list"))))
    assert "26 succeeded · 4 failed (over the tolerance)" in page
    assert "9 succeeded · 1 failed (tolerated)" in page
    assert re.search(r"4 executions", page)


def test_the_total_is_counted_up_to_the_cap(workspace):
    helpers.publish(workspace, "hello", helpers.NOOP)
    for _ in range(4):
        helpers.start(workspace, "hello", {})
    assert selectors.executions.count(workspace, ListFilters()) == 4
    assert selectors.executions.count(workspace, ListFilters(), cap=2) == 3  # "more than 2"
    assert selectors.executions.count(workspace, ListFilters(status="SUCCEEDED")) == 0


def test_the_rows_poll_answers_204_while_nothing_changed_and_stops_when_all_finished(workspace):
    client = client_for(workspace, Role.VIEWER)
    helpers.publish(workspace, "hello", helpers.NOOP)
    helpers.start(workspace, "hello", {})
    page = text(client.get(reverse("ui:execution-list") + "?status=PENDING"))
    version = re.search(r'id="execution-rows" hx-get="([^"]+)".*?"v": "([0-9a-f]+)"', page, re.S)
    assert version, page[:2000]
    url, v = version.group(1).replace("&amp;", "&"), version.group(2)
    assert url == reverse("ui:execution-rows") + "?status=PENDING"
    poll = {"HX-Request": "true", "HX-Trigger": "execution-rows"}
    assert client.get(f"{url}&v={v}", headers=poll).status_code == 204
    helpers.run_engine()
    finished = client.get(f"{reverse('ui:execution-rows')}?v={v}", headers=poll)
    assert finished.status_code == 286  # htmx stops polling: no row is unfinished
    bad = client.get(reverse("ui:execution-rows") + "?status=NOPE", headers={"HX-Request": "true"})
    assert bad.status_code == 400
