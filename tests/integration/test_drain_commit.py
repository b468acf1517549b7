"""The shape of a drain's commit: the call log of HTTP steps is written in the transaction that
commits their results, and the fan-out counters are the last thing written before COMMIT
(commits.commit_once), so the one row every child's commit updates is held briefly."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from executions.models import Destination, DestinationCall
from executions.worker import commits
from tests.support import helpers
from tests.support.httpserver import serve


def _transactions(statements: list[str]) -> list[list[str]]:
    """Statements grouped by transaction (BEGIN .. COMMIT as psycopg sends them)."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for sql in statements:
        head = sql.strip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "BEGIN":
            current = []
        elif head in ("COMMIT", "ROLLBACK"):
            if current is not None:
                groups.append(current)
            current = None
        elif current is not None:
            current.append(" ".join(sql.split()))
    return groups


@pytest.mark.django_db(transaction=True)
def test_the_call_log_goes_with_the_results_and_the_fanout_counters_come_last(workspace, monkeypatch):
    seen: list[str] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    real_commit_once = commits.commit_once

    def commit_once(results: Any, takers: Any = (), versions: Any = None, blocked: Any = None) -> Any:
        seen.append("BEGIN")
        try:
            with connection.execute_wrapper(spy):
                return real_commit_once(results, takers, versions, blocked)
        finally:
            seen.append("COMMIT")

    monkeypatch.setattr(commits, "commit_once", commit_once)  # a spy: every commit of the drain, as it runs
    with serve() as (url, _):
        Destination.objects.create(workspace=workspace, name="api", base_url=url, timeout_seconds=5,
                                   concurrency_limit=8)
        helpers.publish(workspace, "child", helpers.http_doc("api"))
        helpers.publish(workspace, "parent", helpers.fanout_doc())
        parent = helpers.start(workspace, "parent", {"items": list(range(6))})
        for _ in range(10):  # a drain ends when nothing is claimable now; the merge follows the children
            helpers.drain_in_thread()
            if helpers.refresh(parent).status not in ("PENDING", "RUNNING"):
                break
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND state LIKE 'idle in transaction%%'")
            assert cursor.fetchone()[0] == 0, "no drain connection is left inside a transaction"
    assert helpers.refresh(parent).status == "SUCCEEDED"
    assert DestinationCall.objects.count() == 6

    with_calls = [t for t in _transactions(seen) if any("INSERT INTO executions_destinationcall" in s for s in t)]
    assert with_calls, "the call log is written inside a commit of results"
    assert sum(sum("INSERT INTO executions_destinationcall" in s for s in t) for t in with_calls) >= 1
    for statements in with_calls:
        counters = [i for i, s in enumerate(statements) if "UPDATE executions_fanout" in s]
        assert counters, "children of a fan-out finished in this commit"
        after = statements[counters[0]:]
        # After the counters only their consequences: more counters, the merge woken, a NOTIFY.
        for forbidden in ("executions_destinationcall", "INSERT INTO executions_payload",
                          "UPDATE executions_execution", "FOR UPDATE OF s"):
            assert not any(forbidden in s for s in after), (forbidden, after)
        calls = max(i for i, s in enumerate(statements) if "INSERT INTO executions_destinationcall" in s)
        assert calls < counters[0], "the call log comes before the fan-out row is locked"
