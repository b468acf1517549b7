"""Payload-store backpressure (S7): a deferred fan-out is shown as waiting, with its reason
and next check; a started fan-out never waits on bytes it wrote itself; one that could never
fit fails at plan time with the numbers."""

from __future__ import annotations

from django.db import connection
from django.urls import reverse

from executions.core import payloads
from executions.models import Execution
from tests.support import helpers
from tests.support.clients import api, client_for, ok, text
from workflows.models import Role

BLOB = "y" * 2000


def used() -> int:
    with connection.cursor() as cursor:
        return payloads.pressure(cursor).used_bytes


def list_bytes(parent: Execution) -> int:
    """The stored list's size as the plan counts it (jsonb's text form)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT octet_length((data -> 'items')::text) FROM executions_payload "
                       "WHERE execution_id = %s AND name = 'input'", [parent.pk])
        return int(cursor.fetchone()[0])


def test_a_started_fanout_never_waits_on_its_own_childrens_inputs(workspace, settings):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "blob": BLOB} for i in range(40)]
    parent = helpers.start(workspace, "parent", {"items": items})
    before, expected = used(), list_bytes(parent)
    capacity = before + expected + 20_000  # it fits; but its own inputs cross the high-water mark
    settings.SB = {**settings.SB, "SPAWN_BATCH": 5, "PAYLOAD_CAPACITY_BYTES": capacity,
                   "PAYLOAD_HIGH_WATER": (before + expected / 2) / capacity}

    helpers.run_engine()

    parent = helpers.refresh(parent)
    assert helpers.step(parent, "fan").status == "SUCCEEDED", helpers.step(parent, "fan").wait_reason
    assert parent.status == "SUCCEEDED" and helpers.child_counts(parent) == {"SUCCEEDED": 40}


def test_a_fanout_that_could_never_fit_fails_at_plan_time_with_the_numbers(workspace, settings):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "blob": BLOB} for i in range(20)]
    parent = helpers.start(workspace, "parent", {"items": items})
    expected = list_bytes(parent)
    settings.SB = {**settings.SB, "PAYLOAD_CAPACITY_BYTES": expected - 1}

    helpers.run_engine()

    spawner = helpers.step(parent, "fan")
    assert spawner.status == "FAILED"
    assert spawner.error == (f"payload store too small: needs {expected:,} bytes for 20 children's inputs, "
                             f"capacity {expected - 1:,} ({used():,} in use)")
    assert not Execution.objects.filter(parent=parent).exists()


def test_a_fanout_without_room_for_its_expected_bytes_waits_and_is_shown_waiting(workspace, settings):
    helpers.publish(workspace, "child", helpers.NOOP)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "blob": BLOB} for i in range(20)]
    parent = helpers.start(workspace, "parent", {"items": items})
    expected = list_bytes(parent)
    settings.SB = {**settings.SB, "PAYLOAD_CAPACITY_BYTES": used() + expected - 1, "PAYLOAD_HIGH_WATER": 0.99,
                   "PAYLOAD_DEFER_SECONDS": 600}

    helpers.run_engine()

    spawner = helpers.step(parent, "fan")
    assert spawner.status == "READY" and spawner.attempt == 1 and not Execution.objects.filter(parent=parent)
    assert spawner.wait_reason.startswith("payload pressure:")
    assert f"needs {expected:,} more bytes" in spawner.wait_reason
    body = ok(api(workspace).get(f"/api/v1/executions/{parent.pk}"))
    fan = next(s for s in body["steps"] if s["vertex"] == "fan")
    assert fan["status"] == "READY", "the stored status stays READY: a durable timer (state.py)"
    assert fan["waiting"] == {"kind": "payload pressure", "reason": spawner.wait_reason,
                              "next_check_at": fan["due_at"]}
    assert fan["display_status"] == "WAITING"
    viewer = client_for(workspace, Role.VIEWER, "viewer")
    page = text(viewer.get(reverse("ui:execution-steps", args=[parent.pk]), HTTP_HX_REQUEST="true"))
    assert ">WAITING</span>" in page and "waiting for payload pressure" in page and "next check " in page
