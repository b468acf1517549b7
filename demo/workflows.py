"""The demo that ``make run`` loads: a small hello workflow and the "ledger migration" of
the seed article — 1,000 ledger entries fanned out to a child workflow that POSTs each
entry to the demo ledger served by this app (``demo.views``). Until an operator flips the
ledger's switch, the ledger refuses a deterministic ~3% of entries; the merge tolerates 5%."""

from __future__ import annotations

from typing import Any

from executions.models import Destination, Execution
from executions.services import lifecycle as services
from workflows.models import Workspace
from workflows.services import publish_version

LEDGER_DESTINATION = "demo-ledger"

HELLO = {
    "start": "greet",
    "vertices": {
        "greet": {"type": "TASK", "handler": "demo.echo", "input": {"greeting": "hello", "who": "$.input.who"},
                  "next": "check"},
        "check": {"type": "CHOICE", "choices": [
            {"when": {"path": "$.steps.greet.output.who", "exists": True}, "next": "pause"}], "default": "done"},
        "pause": {"type": "TIMER", "seconds": 2, "next": "done"},
        "done": {"type": "SUCCEED", "output": "$.steps.greet.output"},
    },
}

MIGRATE_ENTRY = {
    "start": "post",
    "vertices": {
        "post": {"type": "HTTP", "destination": LEDGER_DESTINATION, "method": "POST", "path": "/entries",
                 "body": "$.input", "retry": {"maxAttempts": 2, "backoffSeconds": 0.5}, "next": "done"},
        "done": {"type": "SUCCEED", "output": "$.steps.post.output.body"},
    },
}

LEDGER_MIGRATION = {
    "start": "fanout",
    "vertices": {
        "fanout": {"type": "SPAWNER", "items": "$.input.entries", "workflow": "migrate-entry", "next": "join"},
        "join": {"type": "MERGE", "spawner": "fanout",
                 # No failFast: the demo's story is recovering the migration (retry the failed
                 # children, the merge redrives to success), and failFast cancels stragglers (S18).
                 "config": {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05}},
                 "next": "done"},
        "done": {"type": "SUCCEED"},
    },
}


def ledger_entries(count: int = 1000) -> list[dict[str, Any]]:
    return [{"id": f"entry-{i:05d}", "account": f"acct-{i % 37:03d}", "amountCents": (i * 7919) % 100_000}
            for i in range(count)]


def load(workspace: Workspace, *, base_url: str) -> None:
    """Publish the demo workflows and the demo ledger destination (idempotent)."""
    Destination.objects.update_or_create(
        workspace=workspace, name=LEDGER_DESTINATION,
        defaults={"base_url": f"{base_url.rstrip('/')}/demo/ledger", "timeout_seconds": 5.0, "concurrency_limit": 8},
    )
    publish_version(workspace, "hello", HELLO, author="demo")
    publish_version(workspace, "migrate-entry", MIGRATE_ENTRY, author="demo")
    publish_version(workspace, "ledger-migration", LEDGER_MIGRATION, author="demo")


def start(workspace: Workspace, which: str) -> list[Execution]:
    """Start the demo executions: ``hello`` (every time), or ``all`` — hello and, once per
    workspace, the 1,000-entry ledger migration — or ``none``."""
    if which == "none":
        return []
    hello = services.start_execution(workspace, workflow="hello", input={"who": "operator"},
                                     created_by="demo").execution
    started = [hello]
    if which == "all" and not Execution.objects.filter(workflow__key="ledger-migration",
                                                       workspace=workspace).exists():
        started.append(services.start_execution(
            workspace, workflow="ledger-migration", input={"entries": ledger_entries(1000)},
            idempotency_key="demo-ledger-migration", created_by="demo").execution)
    return started
