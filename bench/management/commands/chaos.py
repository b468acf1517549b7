"""Fault-tolerance scenarios that print JSON (see docs/reliability.md). Each runs a real
qcluster on a dedicated database (``schemabridge_chaos``) on the configured server, injects
its fault during an N-item fan-out, waits for the run to end and checks the invariants;
the exit status is non-zero on any violation.

    manage.py chaos repeated_kills --items 5000 [--kills 5] [--json]
    manage.py chaos crash_mid_spawn --items 5000
    manage.py chaos postgres_restart --items 5000 [--downtime 3]
    manage.py chaos backend_kill --items 5000
    manage.py chaos stale_lease --items 5000
    manage.py chaos destination_slot_crash --items 5000
    manage.py chaos poison_pill --items 5000
    manage.py chaos all --items 5000

``postgres_restart`` never restarts a shared server: without ``DATABASE_URL`` it runs on a
separate embedded server in ``.pgdata-chaos/`` (``--pgdata``); with ``DATABASE_URL`` it needs
``--restart-command``, a shell command that restarts that server.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

CHAOS_DB = os.environ.get("SB_CHAOS_DB", "schemabridge_chaos")
ROOT = Path(__file__).resolve().parents[3]


class Command(BaseCommand):
    help = "Inject a fault into a real cluster during a fan-out, check the invariants, print JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        from bench.chaos import SCENARIOS

        parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
        parser.add_argument("--items", type=int, default=5_000, help="children of the fan-out (N)")
        parser.add_argument("--workers", type=int, default=2, help="worker processes in the qcluster")
        parser.add_argument("--lease-seconds", type=float, default=2.0, help="step lease of the cluster")
        parser.add_argument("--kills", type=int, help="faults to inject (repeated_kills, backend_kill, "
                                                      "destination_slot_crash)")
        parser.add_argument("--interval", type=float, help="seconds between kills, on average (repeated_kills)")
        parser.add_argument("--poison", type=int, help="poison-pill children (poison_pill)")
        parser.add_argument("--downtime", type=float, help="seconds the server stays down (postgres_restart)")
        parser.add_argument("--seed", type=int, help="seed for the random choices of a scenario")
        parser.add_argument("--pace", type=float, help="seconds the fan-out should take without faults (children "
                                                       "work long enough for that); each scenario has a default")
        parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take")
        parser.add_argument("--restart-command", help="shell command restarting the server of DATABASE_URL "
                                                      "(postgres_restart)")
        parser.add_argument("--pgdata", help="data folder of the separate embedded server for postgres_restart "
                                             "(default .pgdata-chaos)")
        parser.add_argument("--json", action="store_true", help="print only the JSON (no progress on stderr)")

    def handle(self, *args: Any, **options: Any) -> None:
        from bench import chaos

        names = list(chaos.SCENARIOS) if options["scenario"] == "all" else [options["scenario"]]
        self._run_in_chaos_database(restarts="postgres_restart" in names, options=options)
        lab = self._lab(options)
        results = []
        for name in names:
            accepted = inspect.signature(importlib.import_module(f"bench.chaos.{name}").run).parameters
            extra = {key: options[key] for key in ("kills", "interval", "poison", "downtime", "seed", "pace")
                     if key in accepted and options[key] is not None}
            results.append(chaos.run(name, lab, options["items"], **extra))
        output: dict[str, Any] = results[0] if len(results) == 1 else {
            "scenarios": results, "ok": all(r["ok"] for r in results)}
        self.stdout.write(json.dumps(output, indent=None if options["json"] else 2, default=str))
        if not all(r["ok"] for r in results):
            sys.exit(1)

    # -- where it runs ---------------------------------------------------------------------------
    def _run_in_chaos_database(self, *, restarts: bool, options: dict[str, Any]) -> None:
        from bench import common
        from schemabridge_site import embedded_db

        external = bool(os.environ.get("DATABASE_URL", "").strip())
        if restarts and external and not options["restart_command"]:
            raise CommandError(
                "postgres_restart stops and starts the database server. DATABASE_URL is set, so give "
                "--restart-command '<shell command that restarts that server>' — and only for a server "
                "that nobody else is using right now.")
        separate = restarts and not external
        pgdata = Path(options["pgdata"] or ROOT / ".pgdata-chaos").resolve()
        if separate and not common.in_database(CHAOS_DB) and pgdata == embedded_db.data_dir():
            raise CommandError(f"refusing to restart the shared embedded server in {pgdata}; "
                               "give --pgdata a folder of its own")
        if common.in_database(CHAOS_DB) and (not separate or os.environ.get("SB_PGDATA") == str(pgdata)):
            return
        env: dict[str, str] = {}
        conninfo = None
        if separate:
            server = embedded_db.ensure_running(pgdata)
            env["SB_PGDATA"] = str(pgdata)
            conninfo = server.conninfo("postgres")
        common.reexec_in_database(CHAOS_DB, sys.argv[1:], env=env, conninfo=conninfo)

    def _lab(self, options: dict[str, Any]) -> Any:
        from bench.chaos.lab import Lab

        def say(message: str) -> None:
            if not options["json"]:
                sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {message}\n")

        return Lab(database=CHAOS_DB, workers=options["workers"], lease_seconds=options["lease_seconds"],
                   timeout=options["timeout"], restart_server=self._restarter(options), say=say)

    def _restarter(self, options: dict[str, Any]) -> Callable[[float], None] | None:
        command = options["restart_command"]
        if command:
            def restart_with_command(downtime: float) -> None:
                subprocess.run(command, shell=True, check=True, timeout=300)  # noqa: S602 - the operator's command

            return restart_with_command
        from schemabridge_site import embedded_db

        pgdata = Path(options["pgdata"] or ROOT / ".pgdata-chaos").resolve()
        if os.environ.get("DATABASE_URL", "").strip() or os.environ.get("SB_PGDATA") != str(pgdata):
            return None  # not on the separate server: this run must never restart one

        def restart_embedded(downtime: float) -> None:
            embedded_db.stop(pgdata)
            time.sleep(downtime)  # the outage itself
            # Started from a fresh process: pgserver caches its handle per folder and process,
            # so this process would take the stopped server for a running one.
            subprocess.run([sys.executable, str(ROOT / "manage.py"), "sb_db", "start"], check=True, timeout=120,  # noqa: S603
                           cwd=ROOT, env={**os.environ, "SB_PGDATA": str(pgdata)}, stdout=subprocess.DEVNULL)

        return restart_embedded
