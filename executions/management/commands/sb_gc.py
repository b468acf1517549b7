"""Run one complete data-retention pass now (S19): ``manage.py sb_gc [--dry-run] [--json]``.

The pass is the one the scheduled tick runs in the background (executions/core/retention.py),
without the tick's time bound: it purges finished trees older than ``SB_RETENTION_SECONDS``
and deletes the payloads of SUCCEEDED trees older than ``SB_PAYLOAD_RETENTION_SECONDS``, until
nothing is eligible. ``--dry-run`` runs the same pass in one transaction and rolls it back, so
its figures are exact and nothing is deleted (it costs what a real pass costs).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from executions.core import retention


class Command(BaseCommand):
    help = "Run one complete data-retention pass now: purge old finished trees, delete old payloads."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Report what a pass would delete; delete nothing.")
        parser.add_argument("--json", action="store_true", help="Print the figures as one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        report = retention.dry_run(retention.run_pass) if options["dry_run"] else retention.run_pass()
        figures = report.as_dict()
        if options["json"]:
            self.stdout.write(json.dumps(figures))
            return
        prefix = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(f"{prefix}: {figures['trees_purged']:,} trees ({figures['executions_deleted']:,} "
                          f"executions), {figures['payloads_deleted']:,} payloads ({figures['bytes_freed']:,} bytes) "
                          f"in {figures['seconds']:.2f}s")
