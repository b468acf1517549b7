"""Issue 33 §1: the fan-out panel's count cards show the RUNNING children apart — running
now, waiting for a destination's slot, waiting for a retry's backoff — instead of lumping
them all into "running" (59 "running" while 2 calls were in flight)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from executions.models import Destination, Step
from executions.selectors import fanouts as fanout_reads
from tests.support import helpers
from tests.support.clients import text

pytestmark = pytest.mark.django_db(transaction=True)

# Items with ``down`` call a destination that refuses connections (a retry backoff of 10 min
# follows); the others run a task, then call a destination whose limit is 0 (they wait for a slot).
CHILD = {"start": "route", "vertices": {
    "route": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.down", "equals": True}, "next": "down"}],
              "default": "prepare"},
    "down": {"type": "HTTP", "destination": "down", "path": "/x",
             "retry": {"maxAttempts": 3, "backoffSeconds": 600, "jitter": 0}},
    "prepare": {"type": "TASK", "handler": "demo.noop", "next": "closed"},
    "closed": {"type": "HTTP", "destination": "closed", "path": "/x"},
}}


def test_running_children_are_shown_running_waiting_for_a_slot_or_for_a_retry(workspace, operator):
    Destination.objects.create(workspace=workspace, name="down", base_url="http://127.0.0.1:9")
    Destination.objects.create(workspace=workspace, name="closed", base_url="http://127.0.0.1:9",
                               concurrency_limit=0)
    helpers.publish(workspace, "child", CHILD)
    helpers.publish(workspace, "parent", helpers.fanout_doc())
    items = [{"i": i, "down": i < 2} for i in range(5)]
    parent = helpers.start(workspace, "parent", {"items": items})
    for _ in range(10):  # HTTP steps run on a drain's event loop; until both calls to "down" failed once
        helpers.drain_in_thread()
        if Step.objects.filter(vertex="down", wait_reason__startswith="retry backoff").count() == 2:
            break

    view = fanout_reads.of(parent, waiting=True)[0]
    assert view.running == 5 and (view.waiting_retry, view.waiting_slot, view.running_now) == (2, 3, 0)
    # Without ``waiting`` (every view but the panel): the same counts, the running ones not broken down.
    cheap = fanout_reads.of(parent)[0]
    assert cheap.counts() == view.counts() and (cheap.waiting_retry, cheap.waiting_slot) == (0, 0)
    assert fanout_reads.one(parent, "fan").counts() == view.counts()
    html = text(operator.get(reverse("ui:execution-fanout", args=[parent.pk, "fan"]), HTTP_HX_REQUEST="true"))
    cards = dict(re.findall(r'data-count="([A-Z_]+)">([0-9,]+)<', html))
    assert cards["RUNNING"] == "0" and cards["WAITING_SLOT"] == "3" and cards["WAITING_RETRY"] == "2"
    assert "waiting for a slot" in html and "waiting for a retry" in html



# Two fan-outs of one parent, one after the other: the first one's children finished, the
# second one's wait for a callback (RUNNING).
WAITING = {"start": "hold", "vertices": {"hold": {"type": "WAIT", "for": "callback", "timeoutSeconds": 3600}}}
TWO_FANOUTS = {"start": "first", "vertices": {
    "first": {"type": "SPAWNER", "items": "$.input.a", "workflow": "quick", "next": "join-first"},
    "join-first": {"type": "MERGE", "spawner": "first", "next": "second"},
    "second": {"type": "SPAWNER", "items": "$.input.b", "workflow": "holding", "next": "join-second"},
    "join-second": {"type": "MERGE", "spawner": "second"},
}}


def test_each_fan_out_of_a_parent_counts_its_own_active_children(workspace):
    helpers.publish(workspace, "quick", helpers.NOOP)
    helpers.publish(workspace, "holding", WAITING)
    helpers.publish(workspace, "two", TWO_FANOUTS)
    parent = helpers.start(workspace, "two", {"a": [1, 2, 3], "b": [1, 2, 3, 4]})
    helpers.run_engine()
    for waiting in (False, True):
        first, second = fanout_reads.of(parent, waiting=waiting)
        assert (first.spawner_vertex, first.succeeded, first.running, first.pending) == ("first", 3, 0, 0)
        assert (second.spawner_vertex, second.succeeded, second.running, second.pending) == ("second", 0, 4, 0)
        assert fanout_reads.one(parent, "second", waiting=waiting).running == 4
        assert fanout_reads.one(parent, "first", waiting=waiting).running == 0
