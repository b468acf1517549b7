"""Start an execution from the command line and optionally follow it to the end.

    manage.py sb_run ledger-migration --input '{"entries": [...]}' --wait
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions import selectors, services
from executions.models import Execution
from workflows.errors import ServiceError
from workflows.models import Workspace


class Command(BaseCommand):
    help = "Start an execution; with --wait, show live progress and exit 0 only if it succeeded."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow", help="workflow key (runs its current version)")
        parser.add_argument("--input", default="{}", help="execution input as JSON (default {})")
        parser.add_argument("--hash", dest="version_hash", help="run this version hash instead of the current one")
        parser.add_argument("--workspace", default="default")
        parser.add_argument("--idempotency-key", help="return the existing execution for a repeated key")
        parser.add_argument("--wait", action="store_true", help="follow the execution until it finishes")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait at most (with --wait)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            data = json.loads(options["input"])
        except json.JSONDecodeError as error:
            raise CommandError(f"--input is not JSON: {error}") from error
        try:
            workspace = Workspace.objects.get(slug=options["workspace"])
            started = services.start_execution(
                workspace, workflow=options["workflow"], version=options["version_hash"], input=data,
                idempotency_key=options["idempotency_key"], created_by="cli:sb_run",
            )
        except Workspace.DoesNotExist as error:
            raise CommandError(f"no workspace '{options['workspace']}'") from error
        except ServiceError as error:
            raise CommandError(error.message) from error
        execution = started.execution
        self.stderr.write(f"{'started' if started.created else 'existing'} execution {execution.pk} "
                          f"({execution.workflow.key} @ {execution.version.hash[:12]})")
        if not options["wait"]:
            self.stdout.write(str(execution.pk))
            return
        final = self._follow(execution, options["timeout"])
        self.stdout.write(f"{final.status} {final.pk}")
        if final.error:
            self.stderr.write(f"error: {final.error}")
        if final.status != "SUCCEEDED":
            sys.exit(1)

    def _follow(self, execution: Execution, timeout: float) -> Execution:
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            current = Execution.objects.get(pk=execution.pk)
            line = selectors.executions.progress_line(current)
            if line != last:
                self.stderr.write(line)
                last = line
            if current.is_terminal:
                return current
            if time.monotonic() > deadline:
                raise CommandError(f"still {current.status} after {timeout:g}s: {current.pk}")
            time.sleep(0.5)  # polling the database for display only
