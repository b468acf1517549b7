"""``bench flow``: destination flow control against an API that pushes back (issue 29 §5).

The children of ``bench destination`` (one POST each to the destination ``bench-api``, the
default retry policy) fan out into a FragileServer (bench/fragile_server.py) on two worker
processes:

- ``rate``: the server allows R requests per sliding second and answers ``429`` with
  ``Retry-After`` above it; the destination has a fixed limit of 64 and no rate_per_second.
- ``capacity``: the server holds C requests at once (answered after 50 ms) and answers
  ``503`` without Retry-After to the excess; the destination is adaptive with a ceiling of 256.
- ``outage``: the server fails every call with ``500`` for 20 s, from when it has accepted a
  fifth of the items; the destination has a breaker. What the same run makes during the
  outage without a breaker (a fixed limit) is the reference: measured by a second run in the
  same command (``--reference measured``, the default) or computed as limit × outage ÷
  latency, the most a fixed limit can make (``--reference computed``).

The flow-control fields (``concurrency_mode``, ``breaker``, ...) are set only where the model
has them, so the command runs on an engine without them (``engine_fields_missing``) and says
which targets that engine does not meet. While the run lasts, a watch thread reads the
destination's ``cooling_until``, ``concurrency_current`` and ``breaker_state`` (those that
exist) every 0.1 s: a call that reaches the server while the database shows a cooldown is
``calls_during_cooldown`` (bench/flow_targets.py).
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from typing import Any

from django.db import connection
from django.db.models import Max
from django.db.models.functions import Now

from bench import flow_targets
from bench.common import Cluster, machine_speed, reset, wait_until
from bench.destination import progress, publish
from bench.fragile_server import FragileServer
from executions.models import Destination, Execution, Step
from executions.services import lifecycle as services
from workflows.models import Workspace

SCENARIOS = ("rate", "capacity", "outage")
# The scenario's defaults: items, the destination's limit (adaptive: the ceiling), its mode.
DEFAULTS = {"rate": (5_000, 64, "fixed"), "capacity": (10_000, 256, "adaptive"), "outage": (5_000, 64, "fixed")}
BREAKER = {"failure_ratio": 0.5, "min_calls": 20, "window_seconds": 30, "open_seconds": 30}
WATCHED = ("cooling_until", "concurrency_current", "breaker_state")


@dataclasses.dataclass
class Params:
    scenario: str
    items: int
    limit: int
    mode: str
    latency_ms: float = 50.0
    rate: int = 200  # rate: R, requests per sliding second
    capacity: int = 32  # capacity: C, requests held at once
    settle_seconds: float = 10.0  # capacity: the mean in flight is taken after these
    outage_seconds: float = 20.0
    outage_after: int = 0  # outage: accepted requests before it begins (0: a fifth of the items)
    breaker_open_seconds: float = 30.0
    reference: str = "measured"  # outage: "measured" or "computed"
    workers: int = 2
    timeout: float = 900.0

    @classmethod
    def of(cls, scenario: str, **given: Any) -> Params:
        """The scenario's parameters: its defaults, overridden by the given values that are not None."""
        items, limit, mode = DEFAULTS[scenario]
        params = cls(scenario, items, limit, mode)
        return dataclasses.replace(params, **{name: value for name, value in given.items() if value is not None})

    def rules(self) -> dict[str, Any]:
        """The fragile server's rules for this scenario."""
        if self.scenario == "rate":
            return {"rate": self.rate}
        if self.scenario == "capacity":
            return {"capacity": self.capacity}
        return {"outage_after": self.outage_after or max(1, self.items // 5), "outage_seconds": self.outage_seconds}

    def shown(self) -> dict[str, Any]:
        """The parameters the JSON names (only those of this scenario)."""
        shown: dict[str, Any] = {"scenario": self.scenario, "items": self.items, "limit": self.limit,
                                 "mode": self.mode, "latency_ms": self.latency_ms, "workers": self.workers}
        if self.scenario == "capacity":
            shown["settle_seconds"] = self.settle_seconds
        if self.scenario == "outage":
            shown["breaker"] = self.breaker()
        return {**shown, **self.rules()}

    def breaker(self) -> dict[str, Any]:
        return {**BREAKER, "open_seconds": self.breaker_open_seconds}


def engine_fields(params: Params, *, breaker: bool) -> tuple[dict[str, Any], list[str]]:
    """The flow-control fields this scenario sets on its destination (those the model has),
    and the names of the fields it relies on that the model lacks."""
    wanted: dict[str, Any] = {}
    if params.mode == "adaptive":
        wanted.update(concurrency_mode="adaptive", concurrency_min=1)
    if breaker:
        wanted["breaker"] = params.breaker()
    present = {field.name for field in Destination._meta.get_fields()}
    relied_on = {"cooling_until", *wanted}  # every scenario relies on the shared cooldown
    return ({name: value for name, value in wanted.items() if name in present},
            sorted(name for name in relied_on if name not in present))


class Watch:
    """Reads the destination's flow-control state every ``interval`` seconds, with the
    database's own time (epoch seconds), on a connection of its own."""

    def __init__(self, destination_id: int, interval: float = 0.1) -> None:
        present = {field.name for field in Destination._meta.get_fields()}
        self.columns = [name for name in WATCHED if name in present]
        self.destination_id, self.interval = destination_id, interval
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Watch:
        if self.columns:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                row = (Destination.objects.filter(pk=self.destination_id).annotate(db_now=Now())
                       .values("db_now", *self.columns).first())
                if row is not None:
                    now = row.pop("db_now").timestamp()
                    self.samples.append((now, {name: value.timestamp() if hasattr(value, "timestamp") else value
                                               for name, value in row.items()}))
        finally:
            connection.close()

    def series(self, column: str) -> list[tuple[float, Any]]:
        return [(when, values[column]) for when, values in self.samples] if column in self.columns else []


def measure(params: Params, *, breaker: bool) -> dict[str, Any]:
    """One run of the scenario on a fresh engine state: the server's, the children's and the
    watch's figures."""
    reset()
    workspace = Workspace.objects.get(slug="default")
    server = FragileServer(params.scenario, params.latency_ms / 1000.0, **params.rules()).start()
    fields, missing = engine_fields(params, breaker=breaker)
    Destination.objects.filter(workspace=workspace, name="bench-api").delete()
    destination = Destination.objects.create(workspace=workspace, name="bench-api", base_url=server.url,
                                             timeout_seconds=30, concurrency_limit=params.limit, **fields)
    publish(workspace)
    cluster = Cluster(params.workers, sample_memory=False, count_queries=False,
                      SB_OUTBOUND_ALLOW="127.0.0.0/8").start()
    watch = Watch(destination.pk).start()
    try:
        execution = services.start_execution(workspace, workflow="bench-destination",
                                             input={"items": list(range(params.items))}, created_by="bench").execution
        wait_until(lambda: progress(execution.pk), total=params.items, interval=0.25, timeout=params.timeout,
                   label=f"flow {params.scenario}{'' if breaker or params.scenario != 'outage' else ' (reference)'}")
    finally:
        watch.stop()
        cluster.stop()
        server.stop()
    return {**figures(params, server, execution.pk), **watched(watch, server), "engine_fields_missing": missing}


def figures(params: Params, server: FragileServer, execution_id: Any) -> dict[str, Any]:
    """The server's figures and the children's outcome."""
    counts = server.figures
    seconds = (counts.last_at or 0.0) - (counts.first_at or 0.0)
    calls = Step.objects.filter(execution__parent_id=execution_id, vertex="call")
    result: dict[str, Any] = {
        "seconds": round(seconds, 3), "calls": counts.calls, "ok_answers": counts.ok, "throttled": counts.throttled,
        "errors": counts.errors, "abandoned": counts.abandoned,
        "achieved_per_s": round(counts.ok / seconds, 1) if seconds > 0 else 0.0,
        "mean_in_flight": round(counts.busy / seconds, 2) if seconds > 0 else 0.0,
        "max_in_flight": counts.peak,
        "attempts_max": calls.aggregate(most=Max("attempt"))["most"] or 0,
        "children_retried": calls.filter(attempt__gt=1).count(),
        "succeeded": Execution.objects.filter(parent_id=execution_id, status="SUCCEEDED").count(),
        "failed": Execution.objects.filter(parent_id=execution_id, status="FAILED").count(),
        "merge": Step.objects.get(execution_id=execution_id, vertex="join").status,
        "in_flight_by_second": [round(busy, 1) for busy in counts.busy_by_second],
        "ok_by_second": counts.ok_by_second, "throttled_by_second": counts.throttled_by_second,
    }
    if params.scenario == "rate":
        result.update(calls_while_asked_to_wait=counts.early, retry_after_max=counts.retry_after_max,
                      max_accepted_per_window=counts.max_window)
    elif params.scenario == "capacity":
        result.update(mean_in_flight_after_settle=flow_targets.mean_after(
                          counts.busy_by_second, params.settle_seconds,
                          backlog=(counts.ok_by_second, params.items, params.capacity)),
                      mean_in_flight_after_settle_to_the_end=flow_targets.mean_after(counts.busy_by_second,
                                                                                     params.settle_seconds),
                      max_accepted_in_flight=counts.max_accepted)
    else:
        after = None if counts.outage_until is None else (counts.first_wall or 0.0) + counts.outage_until
        result.update(outage_from=None if counts.outage_from is None else round(counts.outage_from, 2),
                      outage_until=None if counts.outage_until is None else round(counts.outage_until, 2),
                      calls_during_outage=counts.calls_during_outage,
                      calls_after_outage=0 if after is None else len(counts.arrivals) - bisect.bisect_left(
                          counts.arrivals, after))
    return result


def watched(watch: Watch, server: FragileServer) -> dict[str, Any]:
    """What the watch saw of the destination's state, against the server's arrivals."""
    origin = server.figures.first_wall or 0.0
    result: dict[str, Any] = {"watched": watch.columns, "watch_samples": len(watch.samples)}
    if "cooling_until" in watch.columns:
        spans = flow_targets.cooldowns(watch.series("cooling_until"))
        result["cooldowns_seen"] = len({until for _, until in watch.series("cooling_until") if until is not None})
        result["calls_during_cooldown"] = flow_targets.calls_within(server.figures.arrivals, spans)
    if "concurrency_current" in watch.columns:
        current = watch.series("concurrency_current")
        result["concurrency_current_max"] = max((value for _, value in current if value is not None), default=None)
        result["concurrency_current_by_second"] = flow_targets.by_second(current, origin)
    if "breaker_state" in watch.columns:
        result["breaker_states"] = flow_targets.transitions(watch.series("breaker_state"), origin)
    return result


def run(params: Params) -> dict[str, Any]:
    machine = machine_speed()
    measured = measure(params, breaker=params.scenario == "outage")
    result: dict[str, Any] = {**params.shown(), **measured}
    result.setdefault("calls_during_cooldown", None)
    if params.scenario == "outage":
        outage = params.rules()["outage_seconds"]
        if params.reference == "measured":
            fixed = measure(params, breaker=False)
            reference = {"how": "measured: the same run without a breaker (the fixed limit)",
                         "calls_during_outage": fixed["calls_during_outage"],
                         **{name: fixed[name] for name in ("seconds", "calls", "errors", "succeeded", "failed")}}
        else:
            bound = round(params.limit * outage / (params.latency_ms / 1000.0))
            reference = {"how": "computed: limit × outage_seconds ÷ latency (the most a fixed limit makes)",
                         "calls_during_outage": bound}
        result["reference"] = reference
        result["reference_calls_during_outage"] = reference["calls_during_outage"]
    result["machine"] = {"before": machine, "after": machine_speed()}
    result["targets"] = flow_targets.evaluate(params.scenario, result)
    result["ok"] = all(target["ok"] for target in result["targets"].values())
    return result
