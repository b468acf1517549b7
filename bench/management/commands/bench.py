"""Benchmarks that print JSON (see docs/performance.md). They run on a dedicated database
(``schemabridge_bench``) on the configured server, with real qcluster subprocesses.

    manage.py bench fanout --items 10000 --workers 2
    manage.py bench floor --items 10000 [--vs-fanout]
    manage.py bench baseline --items 2000 --workers 2 [--compare]
    manage.py bench redelivery --items 10000
    manage.py bench scale [--sizes 1000,10000,100000]
    manage.py bench ui --children 100000      (the operator UI's server time; same as bench_ui)
    manage.py bench cluster --hosts 3 --items 50000 [--broker redis]   (root: network namespaces)
    manage.py bench destination --limit 32 --latency-ms 50 --items 5000 [--background-items 50000]
    manage.py bench steps --items 4000        (an HTTP child's cost to one drain, phase by phase)
    manage.py bench flow --scenario rate|capacity|outage   (429s, overload and an outage; issue 29)
    manage.py bench callbacks --items 10000   (children waiting for callbacks, duplicates, one event; issue 32)
    manage.py bench fairness [--sybil] --json  (a small workspace's job under another's flood; issue 30)
    manage.py bench bulk --items 100000       (a bulk retry and cancel of every child of a fan-out; issue 31)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Run a benchmark and print its figures as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="which", required=True)
        fanout = sub.add_parser("fanout", help="N-item fan-out through a merge on a real qcluster")
        fanout.add_argument("--items", type=int, default=10_000)
        fanout.add_argument("--workers", type=int, default=2)
        fanout.add_argument("--profile", action="store_true", help="add database time by statement shape")
        floor = sub.add_parser("floor", help="raw bulk INSERT of N child and N step rows")
        floor.add_argument("--items", type=int, default=10_000)
        floor.add_argument("--workers", type=int, default=2)
        floor.add_argument("--vs-fanout", action="store_true", help="also run the fan-out and print the ratio")
        baseline = sub.add_parser("baseline", help="one django-q2 task per item with a counting join")
        baseline.add_argument("--items", type=int, default=2_000)
        baseline.add_argument("--workers", type=int, default=2)
        baseline.add_argument("--compare", action="store_true", help="also run the fan-out and print the speed-up")
        redelivery = sub.add_parser("redelivery", help="SIGKILL the spawner's worker at ~50%%")
        redelivery.add_argument("--items", type=int, default=10_000)
        redelivery.add_argument("--workers", type=int, default=2)
        scale = sub.add_parser("scale", help="per-item cost and peak memory at several sizes")
        scale.add_argument("--sizes", default="1000,10000,100000")
        scale.add_argument("--workers", type=int, default=2)
        ui = sub.add_parser("ui", help="server time of the execution view over a large fan-out")
        ui.add_argument("--children", type=int, default=100_000)
        ui.add_argument("--repeats", type=int, default=5)
        cluster = sub.add_parser("cluster", help="worker hosts in network namespaces on one PostgreSQL over TCP; "
                                                 "one host is SIGKILLed halfway (needs root)")
        cluster.add_argument("--hosts", type=int, default=3)
        cluster.add_argument("--items", type=int, default=50_000)
        cluster.add_argument("--workers", type=int, default=2, help="worker processes per host")
        cluster.add_argument("--broker", choices=("database", "redis"), default="database",
                             help="django-q2's broker: the database (default) or a Redis started for the bench")
        cluster.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)  # the run inside the miniature
        destination = sub.add_parser("destination", help="HTTP calls against a destination limit (S11)")
        destination.add_argument("--limit", type=int, default=32, help="the destination's concurrency limit")
        destination.add_argument("--latency-ms", type=float, default=50.0, help="the loopback server's latency")
        destination.add_argument("--items", type=int, default=5_000, help="HTTP calls (one per child)")
        destination.add_argument("--background-items", type=int, default=0,
                                 help="a plain fan-out of no-op TASK children running at the same time")
        destination.add_argument("--workers", type=int, default=2)
        destination.add_argument("--profile", action="store_true", help="add database time by statement shape")
        flow = sub.add_parser("flow", help="flow control against a fragile loopback API: 429s, overload, an outage "
                                           "(issue 29)")
        flow.add_argument("--scenario", choices=("rate", "capacity", "outage"), required=True,
                          help="rate: 429 with Retry-After above R requests/s; capacity: 503 above C requests at "
                               "once; outage: 500 to every call for a while, mid-run")
        flow.add_argument("--items", type=int, help="HTTP calls, one per child (rate 5,000; capacity 10,000; "
                                                    "outage 5,000)")
        flow.add_argument("--limit", type=int, help="the destination's concurrency limit, the ceiling when adaptive "
                                                    "(rate 64; capacity 256; outage 64)")
        flow.add_argument("--mode", choices=("fixed", "adaptive"),
                          help="the destination's concurrency mode (capacity: adaptive; else fixed)")
        flow.add_argument("--latency-ms", type=float, help="the server's answer time (default 50)")
        flow.add_argument("--rate", type=int, help="rate: R, the requests the server allows per sliding second "
                                                   "(default 200)")
        flow.add_argument("--capacity", type=int, help="capacity: C, the requests the server holds at once "
                                                       "(default 32)")
        flow.add_argument("--settle-seconds", type=float,
                          help="capacity: the mean in flight is taken after these (default 10)")
        flow.add_argument("--outage-seconds", type=float, help="outage: how long the server fails (default 20)")
        flow.add_argument("--outage-after", type=int,
                          help="outage: requests accepted before it begins (default a fifth of the items)")
        flow.add_argument("--breaker-open-seconds", type=float,
                          help="outage: the breaker's open_seconds (default 30)")
        flow.add_argument("--reference", choices=("measured", "computed"),
                          help="outage: the fixed limit's calls during the outage, by a second run without a "
                               "breaker (measured, the default) or as limit x outage / latency (computed)")
        flow.add_argument("--workers", type=int)
        waiting = sub.add_parser("callbacks", help="N children each waiting for a callback, duplicate callbacks "
                                                   "for one token, one event for N waiting children (issue 32)")
        waiting.add_argument("--items", type=int, default=10_000)
        waiting.add_argument("--workers", type=int, default=2)
        waiting.add_argument("--duplicates", type=int, default=1_000, help="concurrent copies of one callback")
        waiting.add_argument("--threads", type=int, default=8, help="concurrent callers")
        fairness = sub.add_parser("fairness", help="a small workspace's fan-out and one-step execution while another "
                                                   "workspace runs a 200,000-item fan-out (issue 30)")
        fairness.add_argument("--items", type=int, default=200_000, help="the flooding workspace's items")
        fairness.add_argument("--sybil", action="store_true", help="the flood as 50 fan-outs instead of one")
        fairness.add_argument("--workers", type=int, default=2)
        fairness.add_argument("--small-items", type=int, default=100, help="workspace B's fan-out's items")
        bulked = sub.add_parser("bulk", help="a bulk retry and a bulk cancel of every child of an N-item fan-out "
                                             "(issue 31 §5)")
        bulked.add_argument("--items", type=int, default=100_000, help="the fan-out's children (all FAILED)")
        bulked.add_argument("--workers", type=int, default=2, help="worker processes that build the fan-out")
        steps = sub.add_parser("steps", help="an HTTP child's cost to a drain, phase by phase, in this process")
        steps.add_argument("--items", type=int, default=4_000)
        for each in (fanout, floor, baseline, redelivery, scale, cluster, destination, flow, fairness, steps, waiting,
                     bulked):
            each.add_argument("--json", action="store_true", help="print only the JSON object (the default output)")

    def handle(self, *args: Any, **options: Any) -> None:
        from bench import common

        if options["which"] == "ui":  # it manages its own throwaway database
            from django.core.management import call_command

            call_command("bench_ui", children=options["children"], repeats=options["repeats"], json=True,
                         stdout=self.stdout, stderr=self.stderr)
            return
        if options["which"] == "cluster":  # it builds its own database server and hosts
            result = self._cluster(options)
            self.stdout.write(json.dumps(result, indent=None if options.get("json") or options["driver"] else 2))
            if result.get("ok") is False:
                sys.exit(1)
            return
        if not common.in_bench_database():
            common.reexec_in_bench_database(sys.argv[1:])
        result = getattr(self, f"_{options['which']}")(options)
        self.stdout.write(json.dumps(result, indent=None if options.get("json") else 2))
        if result.get("ok") is False:
            sys.exit(1)

    def _fanout(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import fanout

        return fanout.run(options["items"], options["workers"], profile_queries=options["profile"])

    def _floor(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import fanout, floor

        result = floor.run(options["items"])
        if options["vs_fanout"]:
            measured = fanout.run(options["items"], options["workers"])
            result["fanout"] = measured
            result["fanout_vs_floor"] = round(measured["seconds_total"] / result["seconds"], 2)
            result["ok"] = measured["ok"]
        return result

    def _baseline(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import baseline, fanout

        result = baseline.run(options["items"], options["workers"])
        if options["compare"]:
            measured = fanout.run(options["items"], options["workers"])
            return {"baseline": result, "fanout": measured,
                    "speedup": round(result["seconds_total"] / measured["seconds_total"], 1),
                    "ok": result["ok"] and measured["ok"]}
        return result

    def _redelivery(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import redelivery

        return redelivery.run(options["items"], options["workers"])

    def _scale(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import scale

        sizes = [int(part) for part in options["sizes"].split(",") if part.strip()]
        return scale.run(sizes, options["workers"])

    def _cluster(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import cluster

        if options["driver"]:
            return cluster.drive(options["hosts"], options["items"], options["workers"])
        try:
            return cluster.run(options["hosts"], options["items"], options["broker"], options["workers"])
        except cluster.ClusterBenchError as error:
            raise CommandError(str(error)) from error

    def _callbacks(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import callbacks

        return callbacks.run(options["items"], options["workers"], duplicate_copies=options["duplicates"],
                             threads=options["threads"])

    def _steps(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import steps

        return steps.run(options["items"])

    def _destination(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import destination

        return destination.run(options["limit"], options["latency_ms"], options["items"],
                               background_items=options["background_items"], workers=options["workers"],
                               profile_queries=options["profile"])

    def _bulk(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import bulk

        return bulk.on_cluster(options["items"], options["workers"])

    def _fairness(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import fairness

        return fairness.run(options["items"], options["workers"], sybil=options["sybil"],
                            small_items=options["small_items"])

    def _flow(self, options: dict[str, Any]) -> dict[str, Any]:
        from bench import flow

        names = ("items", "limit", "mode", "latency_ms", "rate", "capacity", "settle_seconds", "outage_seconds",
                 "outage_after", "breaker_open_seconds", "reference", "workers")
        return flow.run(flow.Params.of(options["scenario"], **{name: options[name] for name in names}))
