"""System actors with their private keys, signed requests (claims), system workflows set up
without the API, and the audit log they leave."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from executions.models import Execution
from executions.services import lifecycle as services
from workflows import actors, signing
from workflows.management.commands.sb_actor import actor_admin
from workflows.models import AuditEvent, SystemActor, Workspace
from workflows.services import publish_version
from workflows.sudo import VerifiedActor

# Test set-up publishes and starts system workflows as this (already verified) actor.
SETUP = VerifiedActor("test-setup", ("system.*",))


@dataclass
class Actor:
    name: str
    key: Ed25519PrivateKey
    row: SystemActor


def make_actor(name: str = "deployer", patterns: tuple[str, ...] = ("system.*",)) -> Actor:
    key = signing.new_private_key()
    with actor_admin():  # as manage.py sb_actor does: the database refuses actors registered otherwise
        row = actors.register(name, signing.public_text(key), patterns, by="test")
    return Actor(name, key, row)


def claim(actor: Actor, method: str, path: str, body: bytes = b"", **overrides: Any) -> dict[str, str]:
    """The claim headers as Django test-client keyword arguments (``HTTP_X_SB_…``), signed for
    this deployment and the default workspace unless ``scope`` says otherwise."""
    key = overrides.pop("key", actor.key)
    scope = overrides.pop("scope", None) or signing.Scope(settings.SB["DEPLOYMENT_ID"], "default")
    headers = signing.sign(key, method, path, body, actor=overrides.pop("name", actor.name), scope=scope,
                           **overrides)
    return as_meta(headers)


def as_meta(headers: dict[str, str]) -> dict[str, str]:
    return {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}


def send(client: Any, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    """Send ``body`` (JSON-encoded unless bytes) exactly as signed."""
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    return client.generic(method, path, data, content_type="application/json", **(headers or {}))


def signed(client: Any, actor: Actor, method: str, path: str, body: Any = None, **overrides: Any) -> Any:
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    return send(client, method, path, data, claim(actor, method, path, data, **overrides))


def publish_system(workspace: Workspace, key: str, doc: dict[str, Any]) -> Any:
    return publish_version(workspace, key, doc, author="test", system_actor=SETUP).version


def start_system(workspace: Workspace, key: str, data: Any) -> Execution:
    return services.start_execution(workspace, workflow=key, input=data, system_actor=SETUP).execution


def now() -> int:
    return int(time.time())


def last_audit(action: str) -> AuditEvent:
    return AuditEvent.objects.filter(action=action).latest("id")
