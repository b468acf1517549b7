"""``bench callbacks``: waiting for the outside world at fan-out scale (issue 32), on a real
qcluster with W worker processes.

1. A fan-out of N children, each a WAIT for its own callback: how long until all N wait
   (holding no worker), how fast the N callbacks are accepted (``--threads`` callers, each a
   transaction of ``services.waits.complete_callback``, as the endpoint runs it), and how long
   until the merge succeeded.
2. ``--duplicates`` concurrent copies of one completion for one token: exactly one changes
   anything, and the step is resumed exactly once.
3. One event matching N waiting children: the delivery's time (every step is resumed when
   its one statement commits: the target is 2 s) and the time until the merge succeeded.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection

from bench.common import Cluster, reset, wait_until
from executions.core import waits
from executions.models import Event, Execution, Step, Wait
from executions.services import lifecycle as services
from executions.services import waits as wait_services
from workflows.models import Workspace
from workflows.services import publish_version

CALLBACK_CHILD = {"start": "wait", "vertices": {
    "wait": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600}}}
EVENT_CHILD = {"start": "wait", "vertices": {
    "wait": {"type": "WAIT", "for": "event", "event": "bench.go", "match": {"$.group": "$.input.group"},
             "timeoutSeconds": 3600}}}


def parent(child: str) -> dict[str, Any]:
    return {"start": "fanout", "vertices": {
        "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": child, "next": "join"},
        "join": {"type": "MERGE", "spawner": "fanout"}}}


def publish(workspace: Workspace) -> None:
    publish_version(workspace, "bench-callback-child", CALLBACK_CHILD, author="bench")
    publish_version(workspace, "bench-callbacks", parent("bench-callback-child"), author="bench")
    publish_version(workspace, "bench-event-child", EVENT_CHILD, author="bench")
    publish_version(workspace, "bench-events", parent("bench-event-child"), author="bench")


WAITING_CHILDREN = """
    SELECT count(*) FROM executions_step s JOIN executions_execution e ON e.id = s.execution_id
    WHERE e.parent_id = %s AND s.vertex = 'wait' AND s.status = 'WAITING'
"""


def waiting_children(parent_id: Any) -> int:
    with connection.cursor() as cursor:
        cursor.execute(WAITING_CHILDREN, [parent_id])
        return int(cursor.fetchone()[0])


def finished(execution_id: Any) -> Callable[[], tuple[bool, int]]:
    def check() -> tuple[bool, int]:
        done = Execution.objects.filter(parent_id=execution_id, status="SUCCEEDED").count()
        return Execution.objects.filter(pk=execution_id, status="SUCCEEDED").exists(), done
    return check


def all_waiting(execution_id: Any, items: int) -> Callable[[], tuple[bool, int]]:
    def check() -> tuple[bool, int]:
        count = waiting_children(execution_id)
        return count >= items, count
    return check


def tokens(parent_id: Any) -> list[str]:
    """The callback tokens of a fan-out's waiting children (as an operator reads each one)."""
    rows = Wait.objects.filter(execution__parent_id=parent_id, kind="callback").values_list("step_id", "attempt",
                                                                                            "nonce")
    return [waits.token_for(step_id, attempt, nonce) for step_id, attempt, nonce in rows]


def in_threads(threads: int, work: list[Callable[[], Any]]) -> list[Any]:
    """Run ``work`` on ``threads`` threads, each a caller with one database connection of its
    own for all its calls (a connection per call would measure connecting)."""
    def call_all(chunk: list[Callable[[], Any]]) -> list[Any]:
        try:
            return [function() for function in chunk]
        finally:
            connection.close()
    chunks = [work[index::threads] for index in range(threads)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [answer for answers in pool.map(call_all, chunks) for answer in answers]


def start(workspace: Workspace, workflow: str, items: list[Any]) -> Execution:
    return services.start_execution(workspace, workflow=workflow, input={"items": items}, created_by="bench").execution


def callbacks(workspace: Workspace, items: int, threads: int, limit: float) -> dict[str, Any]:
    started = time.monotonic()
    execution = start(workspace, "bench-callbacks", list(range(items)))
    to_waiting = wait_until(all_waiting(execution.pk, items), total=items, label="children waiting", timeout=limit)
    found = tokens(execution.pk)
    done = wait_services.completion("SUCCEEDED", {"ok": True})
    accepted_at = time.monotonic()
    answers = in_threads(threads, [functools.partial(wait_services.complete_callback, token, done)
                                   for token in found])
    accepting = time.monotonic() - accepted_at
    to_merged = wait_until(finished(execution.pk), total=items, label="callbacks to merge", timeout=limit)
    return {"children": items, "seconds_to_all_waiting": round(to_waiting, 3),
            "callbacks_per_s": round(len(found) / accepting, 1) if accepting else None,
            "callbacks_accepted": sum(a.changed for a in answers),
            "seconds_callbacks_to_merged": round(accepting + to_merged, 3),
            "seconds_total": round(time.monotonic() - started, 3),
            "merge": Step.objects.get(execution=execution, vertex="join").status}


def duplicates(workspace: Workspace, copies: int, threads: int, limit: float) -> dict[str, Any]:
    execution = start(workspace, "bench-callbacks", [0])
    wait_until(all_waiting(execution.pk, 1), total=1, label="one child waiting", timeout=limit)
    [token] = tokens(execution.pk)
    done = wait_services.completion("SUCCEEDED", {"once": True})
    started = time.monotonic()
    def once() -> waits.Answer:
        return wait_services.complete_callback(token, done)

    answers = in_threads(threads, [once] * copies)
    seconds = time.monotonic() - started
    wait_until(finished(execution.pk), total=1, label="duplicates to merge", timeout=limit)
    child = Execution.objects.get(parent_id=execution.pk)
    resumed = Event.objects.filter(execution_id=child.pk, vertex="wait", from_status="WAITING",
                                   to_status="READY").count()
    return {"copies": copies, "threads": threads, "changed": sum(a.changed for a in answers),
            "resumed": resumed, "seconds": round(seconds, 3)}


def events(workspace: Workspace, items: int, limit: float) -> dict[str, Any]:
    execution = start(workspace, "bench-events", [{"group": "g"}] * items)
    wait_until(all_waiting(execution.pk, items), total=items, label="children waiting for the event", timeout=limit)
    started = time.monotonic()
    delivered = wait_services.post_event(workspace.pk, "bench.go", {"group": "g"}, key="bench-go")
    delivery = time.monotonic() - started
    still_waiting = waiting_children(execution.pk)
    to_merged = wait_until(finished(execution.pk), total=items, label="event to merge", timeout=limit)
    return {"waiting": items, "delivered": delivered, "seconds_delivery": round(delivery, 3),
            "still_waiting_after_delivery": still_waiting,
            "seconds_event_to_merged": round(delivery + to_merged, 3),
            "merge": Step.objects.get(execution=execution, vertex="join").status}


def run(items: int, workers: int, *, duplicate_copies: int = 1000, threads: int = 8) -> dict[str, Any]:
    reset()
    workspace = Workspace.objects.get(slug="default")
    publish(workspace)
    limit = max(600.0, items / 20)
    cluster = Cluster(workers, sample_memory=False, count_queries=False).start()
    try:
        result: dict[str, Any] = {"items": items, "workers": workers,
                                  "callbacks": callbacks(workspace, items, threads, limit),
                                  "duplicates": duplicates(workspace, duplicate_copies, threads, limit),
                                  "event": events(workspace, items, limit)}
    finally:
        cluster.stop()
    fan, dup, event = result["callbacks"], result["duplicates"], result["event"]
    result["event_resumed_within_2s"] = event["seconds_delivery"] <= 2.0
    result["ok"] = (fan["callbacks_accepted"] == items and fan["merge"] == "SUCCEEDED"
                    and dup["changed"] == 1 and dup["resumed"] == 1
                    and event["delivered"] == items and event["still_waiting_after_delivery"] == 0
                    and event["merge"] == "SUCCEEDED")
    return result
