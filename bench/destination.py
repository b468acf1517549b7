"""``bench destination``: how well the workers use a destination's concurrency limit (S11).

A fan-out of N items whose child makes one HTTP call to a loopback server that answers each
request after ``latency_ms``; the destination allows ``limit`` calls at once, so the best any
engine can do is ``limit / latency`` calls per second (``bound_calls_per_s``). Optionally a
plain fan-out of ``background_items`` no-op TASK children runs at the same time (fairness:
the HTTP steps must not wait behind it).

Measured at the server: ``calls_per_s`` is the calls answered between the first request's
arrival and the last response, ``max_in_flight`` the most requests it held at once (it must
never exceed the limit), ``utilisation`` = calls_per_s / bound_calls_per_s.
"""

from __future__ import annotations

from typing import Any

from bench.common import Cluster, CpuSampler, machine_speed, reset, wait_until
from bench.latency_server import LatencyServer
from executions.models import Destination, Execution, FanOut, Step
from executions.services import lifecycle as services
from workflows.models import Workspace
from workflows.services import publish_version

CHILD = {"start": "call", "vertices": {"call": {
    "type": "HTTP", "destination": "bench-api", "method": "POST", "path": "/call", "body": {"item": "$.input"},
}}}
PARENT = {"start": "fanout", "vertices": {
    "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": "bench-call", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fanout"},
}}
NOOP_CHILD = {"start": "work", "vertices": {"work": {"type": "TASK", "handler": "demo.noop"}}}
NOOP_PARENT = {"start": "fanout", "vertices": {
    "fanout": {"type": "SPAWNER", "items": "$.input.items", "workflow": "bench-noop", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fanout"},
}}


def publish(workspace: Workspace) -> None:
    publish_version(workspace, "bench-call", CHILD, author="bench")
    publish_version(workspace, "bench-destination", PARENT, author="bench")
    publish_version(workspace, "bench-noop", NOOP_CHILD, author="bench")
    publish_version(workspace, "bench-background", NOOP_PARENT, author="bench")


def progress(execution_id: Any) -> tuple[bool, int]:
    fan = FanOut.objects.filter(execution_id=execution_id).first()
    done = fan.succeeded + fan.failed + fan.cancelled if fan else 0
    finished = Execution.objects.filter(pk=execution_id, status__in=["SUCCEEDED", "FAILED", "CANCELLED"]).exists()
    return finished, done


def run(limit: int, latency_ms: float, items: int, *, background_items: int = 0, workers: int = 2,
        timeout: float = 900.0, profile_queries: bool = False) -> dict[str, Any]:
    reset()
    machine = machine_speed()
    workspace = Workspace.objects.get(slug="default")
    server = LatencyServer(latency_ms / 1000.0).start()
    Destination.objects.filter(workspace=workspace, name="bench-api").delete()
    Destination.objects.create(workspace=workspace, name="bench-api", base_url=server.url, timeout_seconds=30,
                               concurrency_limit=limit)
    publish(workspace)
    cluster = Cluster(workers, sample_memory=False, count_queries=profile_queries,
                      SB_OUTBOUND_ALLOW="127.0.0.0/8").start()
    cpu = CpuSampler(cluster, server.pid).start()
    background = None
    try:
        if background_items:
            background = services.start_execution(workspace, workflow="bench-background",
                                                  input={"items": list(range(background_items))},
                                                  created_by="bench").execution
        execution = services.start_execution(workspace, workflow="bench-destination",
                                             input={"items": list(range(items))}, created_by="bench").execution
        # Polled every 0.25 s: the figures are taken at the server, and the poll's queries run on
        # the measured machine (at 0.05 s they cost the workers' cores ~0.3 of one).
        wait_until(lambda: progress(execution.pk), total=items, label=f"destination {items:,}", timeout=timeout,
                   interval=0.25)
        background_done = progress(background.pk)[1] if background is not None else 0
        profile = cluster.query_profile(20) if profile_queries else None
    finally:
        cpu.stop()
        cluster.stop()
        server.stop()
    seconds = (server.last_at or 0.0) - (server.first_at or 0.0)
    calls_per_s = server.answered / seconds if seconds > 0 else 0.0
    bound = limit / (latency_ms / 1000.0)
    succeeded = Execution.objects.filter(parent_id=execution.pk, status="SUCCEEDED").count()
    merge = Step.objects.get(execution_id=execution.pk, vertex="join").status
    result: dict[str, Any] = {
        "limit": limit, "latency_ms": latency_ms, "items": items, "workers": workers,
        "background_items": background_items, "background_done_meanwhile": background_done,
        "calls": server.answered, "seconds": round(seconds, 3),
        "calls_per_s": round(calls_per_s, 1), "bound_calls_per_s": round(bound, 1),
        "utilisation": round(calls_per_s / bound, 3), "max_in_flight": server.peak,
        # Calls in flight at the server on average, and how long each was held there: together
        # they tell idle slots (mean_in_flight below the limit) from slow answers.
        "mean_in_flight": round(server.busy / seconds, 1) if seconds > 0 else 0.0,
        "mean_call_ms": round(1000 * server.busy / server.answered, 1) if server.answered else 0.0,
        # The same per whole second of the run: the ramp while children are created, dips, the tail.
        "in_flight_by_second": [round(busy, 1) for busy in server.busy_by_second],
        "succeeded": succeeded, "merge": merge,
        # CPU milliseconds per call between the first request and the last answer, by who used
        # them (the worker cluster, PostgreSQL, this server, the rest of the machine), and the
        # cores busy meanwhile: once the cores are the limit, a change that makes a call
        # cheaper shows here even when calls_per_s moves with the machine's other load.
        "cpu_ms_per_call": cpu.per_unit(server.first_at or 0.0, server.last_at or 0.0, server.answered),
        # The machine's speed before the run and after it (bench.common.machine_speed): what
        # tells a slower engine from a slower machine or busier neighbours.
        "machine": {"before": machine, "after": machine_speed()},
    }
    result["ok"] = succeeded == items and merge == "SUCCEEDED" and server.peak <= limit
    if profile is not None:
        result["profile"] = profile
    return result
