"""Publish a DSL file as a new version of a workflow: ``manage.py sb_publish KEY FILE``.

Audited as ``workflow.publish`` by ``cli:sb_publish``. Reserved keys (``system.*``) are refused
here like everywhere: system actors publish them through the API with a signed claim.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows import dsl
from workflows.access import Principal
from workflows.audit import audited
from workflows.errors import ServiceError
from workflows.models import Role, Workspace
from workflows.services import publish_version


class Command(BaseCommand):
    help = "Validate a workflow DSL file and publish it; prints the version hash."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="workflow key, e.g. ledger-migration")
        parser.add_argument("file", help="path to the DSL JSON file ('-' for standard input)")
        parser.add_argument("--workspace", default="default", help="workspace slug (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            workspace = Workspace.objects.get(slug=options["workspace"])
        except Workspace.DoesNotExist as error:
            raise CommandError(f"no workspace '{options['workspace']}'") from error
        source = options["file"]
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text()
            doc = json.loads(text)
        except OSError as error:
            raise CommandError(f"cannot read {source}: {error}") from error
        except json.JSONDecodeError as error:
            raise CommandError(f"{source} is not JSON: {error}") from error
        principal = Principal(workspace, Role.ADMIN, "cli:sb_publish")
        try:
            with audited(principal, "workflow.publish", target=options["key"]):
                published = publish_version(workspace, options["key"], doc, author=principal.label)
        except dsl.DslError as error:
            for path, message in error.errors:
                self.stderr.write(f"{path}: {message}")
            raise CommandError(f"{len(error.errors)} error(s) in {source}; nothing published") from error
        except ServiceError as error:
            raise CommandError(error.message) from error
        state = "published" if published.created else "already published (now current)"
        self.stderr.write(f"{options['key']}: {state}")
        self.stdout.write(published.version.hash)
