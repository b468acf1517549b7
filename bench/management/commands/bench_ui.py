"""``manage.py bench_ui --children 100000 [--repeats 5] [--json]``: server time of the
execution view over a large fan-out, in a throwaway database (created, migrated, dropped)
so the benchmark's rows never land in a real one."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from bench import ui

BENCH_DATABASE = "sb_bench_ui"


class Command(BaseCommand):
    help = "Time the execution view (page and live fragments) over a fan-out of N children."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--children", type=int, default=100_000)
        parser.add_argument("--repeats", type=int, default=5)
        parser.add_argument("--json", action="store_true", help="print only the JSON figures")
        parser.add_argument("--keep-db", action="store_true", help=f"keep the '{BENCH_DATABASE}' database")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["children"] < 1 or options["repeats"] < 1:
            self.stderr.write("--children and --repeats must be at least 1")
            raise SystemExit(2)
        original = connection.settings_dict["NAME"]
        connection.settings_dict["TEST"] = {**connection.settings_dict.get("TEST", {}), "NAME": BENCH_DATABASE}
        # Creating the database runs other commands that print; --json output stays pure JSON.
        with contextlib.redirect_stdout(sys.stderr):
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            result = ui.run(children=options["children"], repeats=options["repeats"])
        finally:
            if not options["keep_db"]:
                connection.creation.destroy_test_db(original, verbosity=0)
        self.stdout.write(json.dumps(result, indent=None if options["json"] else 2))
        if not options["json"]:
            self.stdout.write(self._summary(result))

    def _summary(self, result: dict[str, Any]) -> str:
        lines = [f"\n{result['children']:,} children (built in {result['build_seconds']} s):"]
        for name, r in result["results"].items():
            target = ui.PAGE_TARGET_MS if name in ui.PAGES else ui.FRAGMENT_TARGET_MS
            mark = "ok" if r["median_ms"] < target else "SLOW"
            lines.append(f"  {name:34s} {r['median_ms']:8.1f} ms median {r['max_ms']:8.1f} ms max "
                         f"{r['queries']:3d} queries  {mark} (< {target:g} ms)")
        lines.append("Lookups (issue 31 §4; targets at 1,000,000 children):")
        for name, r in result["lookups"].items():
            target = ui.LOOKUP_TARGETS_MS["item key" if name.startswith("item key") else "tag"]
            mark = "ok" if r["median_ms"] < target else "SLOW"
            lines.append(f"  {name:34s} {r['median_ms']:8.1f} ms median {r['max_ms']:8.1f} ms max "
                         f"{r['queries']:3d} queries  {mark} (< {target:g} ms)")
        return "\n".join(lines)
