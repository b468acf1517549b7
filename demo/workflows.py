"""The demo that ``make run`` loads: a small hello workflow and the "ledger migration" of
the seed article — 1,000 ledger entries fanned out to a child workflow that POSTs each
entry to the demo ledger served by this app (``demo.views``). Until an operator flips the
ledger's switch, the ledger refuses a deterministic ~3% of entries; the merge tolerates 5%.

And the poller of the second seed article (``while not deployment.is_ready(): sleep(60)``)
without the poll: ``deploy-service`` starts a rollout (``demo-rollout``, a child of its own
that becomes ready after ``ROLLOUT_SECONDS`` and announces it with a ``deployment.ready``
event) and WAITs for that event, holding no worker — no loop, no ``sleep()``, no TIMER."""

from __future__ import annotations

import uuid
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


ROLLOUT_SECONDS = 5
DEPLOYMENT_READY = "deployment.ready"

# The infrastructure side: a rollout that takes a while, then says so (demo.announce_ready
# posts the event, as a deployment system's webhook would).
DEMO_ROLLOUT = {
    "start": "roll",
    "vertices": {
        "roll": {"type": "TIMER", "seconds": ROLLOUT_SECONDS, "next": "announce"},
        "announce": {"type": "TASK", "handler": "demo.announce_ready", "input": "$.input"},
    },
}

DEPLOY_SERVICE = {
    "start": "plan",
    "vertices": {
        "plan": {"type": "TASK", "handler": "demo.echo",
                 "input": {"rollouts": [{"deploymentId": "$.input.deploymentId", "service": "$.input.service"}]},
                 "next": "rollout"},
        # No MERGE: the rollout runs on its own; this execution does not wait for it as a child.
        "rollout": {"type": "SPAWNER", "items": "$.steps.plan.output.rollouts", "workflow": "demo-rollout",
                    "next": "ready"},
        # Instead of `while not deployment.is_ready(): sleep(60)`. lookbackSeconds: an event sent
        # before this step began waiting still counts (no race between "wait" and "ready").
        "ready": {"type": "WAIT", "for": "event", "event": DEPLOYMENT_READY,
                  "match": {"$.deploymentId": "$.input.deploymentId"}, "timeoutSeconds": 600, "lookbackSeconds": 300,
                  "next": "done"},
        "done": {"type": "SUCCEED", "output": {"deploymentId": "$.input.deploymentId",
                                               "url": "$.steps.ready.output.url"}},
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
    publish_version(workspace, "demo-rollout", DEMO_ROLLOUT, author="demo")
    publish_version(workspace, "deploy-service", DEPLOY_SERVICE, author="demo")


def start_deployment(workspace: Workspace, service: str = "checkout") -> Execution:
    """A ``deploy-service`` execution for a fresh deployment id."""
    deployment = f"{service}-{uuid.uuid4().hex[:8]}"
    return services.start_execution(workspace, workflow="deploy-service",
                                    input={"deploymentId": deployment, "service": service},
                                    created_by="demo").execution


def start(workspace: Workspace, which: str) -> list[Execution]:
    """Start the demo executions: ``hello`` and a deployment awaited by event (every time), or
    ``all`` — those and, once per workspace, the 1,000-entry ledger migration — or ``none``."""
    if which == "none":
        return []
    hello = services.start_execution(workspace, workflow="hello", input={"who": "operator"},
                                     created_by="demo").execution
    started = [hello, start_deployment(workspace)]
    if which == "all" and not Execution.objects.filter(workflow__key="ledger-migration",
                                                       workspace=workspace).exists():
        started.append(services.start_execution(
            workspace, workflow="ledger-migration", input={"entries": ledger_entries(1000)},
            idempotency_key="demo-ledger-migration", created_by="demo").execution)
    return started
