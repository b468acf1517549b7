"""Start an execution from the command line and optionally follow it to the end.

    manage.py sb_run ledger-migration --input '{"entries": [...]}' --wait
    manage.py sb_run ledger-migration --items-file entries.jsonl --items-at entries --wait
    manage.py sb_run ledger-migration --input '{}' --tag customer=acme --tag region=eu

With ``--items-file`` the file (JSON Lines, or CSV for a ``.csv`` name) is streamed into an
upload (executions/services/uploads.py) and the start names it at ``--items-at``, exactly as an API
client does with ``POST /api/v1/uploads`` and ``{"$upload": id}``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from executions import selectors
from executions.models import Execution
from executions.services import lifecycle as services
from executions.services import uploads
from workflows import tags as tag_rules
from workflows.errors import ServiceError
from workflows.models import Workspace


class Command(BaseCommand):
    help = "Start an execution; with --wait, show live progress and exit 0 only if it succeeded."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow", help="workflow key (runs its current version)")
        parser.add_argument("--input", default="{}", help="execution input as JSON (default {})")
        parser.add_argument("--items-file", help="a JSON Lines (or .csv) file of items, uploaded for the start")
        parser.add_argument("--items-at", help="where the file's list goes in the input, e.g. entries or batch.entries")
        parser.add_argument("--items-format", choices=["jsonl", "csv"], help="default: csv for a .csv file, else jsonl")
        parser.add_argument("--hash", dest="version_hash", help="run this version hash instead of the current one")
        parser.add_argument("--workspace", default="default")
        parser.add_argument("--idempotency-key", help="return the existing execution for a repeated key")
        parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                            help="a tag (repeat it, up to 20), inherited by every descendant")
        parser.add_argument("--priority", type=int, help="1 (first) to 5 (default 3), shared by every descendant")
        parser.add_argument("--wait", action="store_true", help="follow the execution until it finishes")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait at most (with --wait)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            data = json.loads(options["input"])
        except json.JSONDecodeError as error:
            raise CommandError(f"--input is not JSON: {error}") from error
        if bool(options["items_file"]) != bool(options["items_at"]):
            raise CommandError("--items-file and --items-at go together")
        try:
            tags = tag_rules.from_pairs(options["tag"], field="--tag")
            workspace = Workspace.objects.get(slug=options["workspace"])
            with transaction.atomic():
                if options["items_file"]:
                    data = self._upload(workspace, data, options)
                started = services.start_execution(
                    workspace, workflow=options["workflow"], version=options["version_hash"], input=data,
                    idempotency_key=options["idempotency_key"], created_by="cli:sb_run", tags=tags,
                    priority=options["priority"],
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

    def _upload(self, workspace: Workspace, data: Any, options: dict[str, Any]) -> Any:
        """Stream the items file into an upload; the input names it at --items-at."""
        name = options["items_file"]
        format = options["items_format"] or ("csv" if name.lower().endswith(".csv") else "jsonl")
        try:
            with open(name, "rb") as handle:
                received = uploads.receive(workspace.pk, handle.read, format=format, created_by="cli:sb_run")
        except OSError as error:
            raise CommandError(f"--items-file: {error}") from error
        self.stderr.write(f"uploaded {received.items:,} items ({received.bytes:,} bytes) as {received.id}")
        return place(data, options["items_at"], {uploads.MARKER: str(received.id)})

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


def place(data: Any, at: str, value: Any) -> Any:
    """``data`` with ``value`` at the dotted path ``at`` (objects created on the way)."""
    if not isinstance(data, dict):
        raise CommandError("--input must be a JSON object to take --items-at")
    keys = at.split(".")
    if any(not key for key in keys):
        raise CommandError(f"--items-at '{at}' is keys separated by dots, e.g. entries or batch.entries")
    here = data
    for key in keys[:-1]:
        here = here.setdefault(key, {})
        if not isinstance(here, dict):
            raise CommandError(f"--items-at '{at}': '{key}' in --input is not an object")
    here[keys[-1]] = value
    return data
