"""Pause or resume an execution tree or a whole workspace from the command line (issue 31),
through the same services as the API and the UI; audited as ``cli:sb_pause``.

    manage.py sb_pause <execution-id>            # pause the execution and everything under it
    manage.py sb_pause <execution-id> --resume
    manage.py sb_pause --all                     # pause the whole workspace (new executions wait)
    manage.py sb_pause --all --resume

It prints the state afterwards: paused or not, the steps still in flight, drained.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions import selectors
from executions.services import control
from executions.services import lifecycle as services
from workflows import audit
from workflows.errors import ServiceError
from workflows.models import Workspace

ACTOR = "cli:sb_pause"


class Command(BaseCommand):
    help = "Pause (or --resume) an execution tree, or with --all the whole workspace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution", nargs="?", help="the execution id (its whole subtree is paused)")
        parser.add_argument("--all", action="store_true", help="the whole workspace instead of one execution")
        parser.add_argument("--resume", action="store_true", help="resume instead of pausing")
        parser.add_argument("--workspace", default="default")

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["execution"]) == bool(options["all"]):
            raise CommandError("give an execution id or --all")
        try:
            workspace = Workspace.objects.get(slug=options["workspace"])
        except Workspace.DoesNotExist as error:
            raise CommandError(f"no workspace {options['workspace']!r}") from error
        verb = "resume" if options["resume"] else "pause"
        try:
            if options["all"]:
                changed = (control.resume_workspace(workspace) if options["resume"]
                           else control.pause_workspace(workspace, actor=ACTOR))
                audit.record(ACTOR, f"workspace.{verb}", workspace=workspace, target=workspace.slug)
                state = selectors.pauses.of_workspace(workspace)
            else:
                execution = services.get_execution(workspace, options["execution"])
                act = control.resume_execution if options["resume"] else control.pause_execution
                changed = act(execution, actor=ACTOR)
                audit.record(ACTOR, f"execution.{verb}", workspace=workspace, target=str(execution.pk))
                state = selectors.pauses.of_execution(execution)
        except ServiceError as error:
            raise CommandError(error.message) from error
        said = "paused" if state.paused else "not paused"
        drained = " (drained)" if state.drained else ""
        self.stdout.write(f"{said}{'' if changed else ' (unchanged)'}; {state.in_flight} step(s) in flight{drained}")
