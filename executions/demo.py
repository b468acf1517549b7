"""The demo that ``make run`` loads: a small hello workflow and the "ledger migration" of
the seed article — 1,000 ledger entries fanned out to a child workflow that POSTs each
entry to a demo ledger served by this app. Until an operator flips the ledger's switch,
the ledger refuses a deterministic ~3% of entries; the merge tolerates 5%."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from executions.models import DemoLedgerEntry, DemoSwitch, Destination
from workflows.models import Workspace
from workflows.services import publish_version

LEDGER_HEALTHY = "ledger-healthy"
FAILING_PERCENT = 3

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
        "post": {"type": "HTTP", "destination": "demo-ledger", "method": "POST", "path": "/entries",
                 "body": "$.input", "retry": {"maxAttempts": 2, "backoffSeconds": 0.5}, "next": "done"},
        "done": {"type": "SUCCEED", "output": "$.steps.post.output.body"},
    },
}

LEDGER_MIGRATION = {
    "start": "fanout",
    "vertices": {
        "fanout": {"type": "SPAWNER", "items": "$.input.entries", "workflow": "migrate-entry", "next": "join"},
        "join": {"type": "MERGE", "spawner": "fanout",
                 "config": {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05},
                            "failFast": True},
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
        workspace=workspace, name="demo-ledger",
        defaults={"base_url": f"{base_url.rstrip('/')}/demo/ledger", "timeout_seconds": 5.0, "concurrency_limit": 8},
    )
    publish_version(workspace, "hello", HELLO, author="demo")
    publish_version(workspace, "migrate-entry", MIGRATE_ENTRY, author="demo")
    publish_version(workspace, "ledger-migration", LEDGER_MIGRATION, author="demo")


def refuses(entry_id: str) -> bool:
    """The deterministic ~3% of entries the unhealthy ledger refuses."""
    return int(hashlib.sha256(entry_id.encode()).hexdigest(), 16) % 100 < FAILING_PERCENT


def ledger_healthy() -> bool:
    return DemoSwitch.objects.filter(name=LEDGER_HEALTHY, on=True).exists()


def set_ledger_healthy(on: bool) -> None:
    """Flip the demo ledger's outage: healthy, it accepts every entry."""
    DemoSwitch.objects.update_or_create(name=LEDGER_HEALTHY, defaults={"on": on})


@csrf_exempt
@require_POST
def ledger_entries_view(request: HttpRequest) -> HttpResponse:
    """The demo ledger: ``POST /demo/ledger/entries`` with an entry and an Idempotency-Key."""
    try:
        entry = json.loads(request.body or b"null")
    except json.JSONDecodeError:
        return JsonResponse({"error": "body is not JSON"}, status=400)
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return JsonResponse({"error": "an entry is an object with a string 'id'"}, status=400)
    if refuses(entry["id"]) and not ledger_healthy():
        return JsonResponse({"error": f"ledger unavailable for {entry['id']} (demo outage)"}, status=503)
    key = request.headers.get("Idempotency-Key") or f"entry:{entry['id']}"
    _, created = DemoLedgerEntry.objects.get_or_create(idempotency_key=key, defaults={"entry": entry})
    return JsonResponse({"id": entry["id"], "written": created}, status=201 if created else 200)
