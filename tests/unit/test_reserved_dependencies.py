"""What a reserved workflow may depend on (issue 15, finding 10), as one rule without a
database: reserved destinations only, and reserved workflows or pinned versions only."""

from __future__ import annotations

import re
from typing import Any

import pytest

from workflows import dsl, sudo

HASH = "a" * 64


@pytest.mark.parametrize("kwargs", [
    {"destination": "system.crm"},
    {"target": "system.child"},
    {"target": "ordinary", "pinned": True},
    {"target": "", "pinned": True},
])
def test_reserved_dependencies_pass(kwargs: dict[str, Any]) -> None:
    sudo.check_reserved_dependency("system.rollout", **kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"destination": "crm"}, "may call only reserved destinations (system.*), not 'crm'"),
    ({"target": "migrate-entry"}, "not the current version of 'migrate-entry'"),
])
def test_ordinary_dependencies_of_a_reserved_workflow_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(sudo.ReservedKeyDenied, match=re.escape(message)):
        sudo.check_reserved_dependency("system.rollout", **kwargs)


def test_an_ordinary_workflow_may_depend_on_anything() -> None:
    sudo.check_reserved_dependency("ordinary", destination="crm", target="other")


def test_every_problem_of_a_document_is_reported_with_its_path() -> None:
    doc = {"start": "call", "vertices": {
        "call": {"type": "HTTP", "destination": "crm", "next": "task"},
        "task": {"type": "TASK", "handler": "demo.noop", "destination": "system.ok", "next": "fan"},
        "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "entry", "next": "pinned"},
        "pinned": {"type": "SPAWNER", "items": "$.input.items", "workflow": "entry", "version": HASH,
                   "next": "again"},
        "again": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.v", "equals": 1}, "next": "loop"}],
                  "default": "next"},
        "loop": {"type": "CHAIN", "workflow": "self"},
        "next": {"type": "CHAIN", "workflow": "other"}}}
    with pytest.raises(sudo.ReservedKeyDenied) as refusal:
        sudo.check_reserved_dependencies("system.rollout", dsl.parse(doc))
    assert [error["path"] for error in refusal.value.errors] == [
        "$.vertices.call.destination", "$.vertices.fan.workflow", "$.vertices.next.workflow"]
    sudo.check_reserved_dependencies("ordinary", dsl.parse(doc))


@pytest.mark.parametrize("actor", [None, sudo.VerifiedActor("billing", ("system.billing.*",))])
def test_a_reserved_destination_is_changed_only_by_a_covering_actor(actor: sudo.VerifiedActor | None) -> None:
    with pytest.raises(sudo.ReservedKeyDenied, match=r"destination 'system\.crm'"):
        sudo.require_destination("system.crm", actor, "changing")
    sudo.require_destination("system.crm", sudo.VerifiedActor("deployer", ("system.*",)), "changing")
    sudo.require_destination("crm", None, "changing")
