"""The chaos scenarios, small and fast, on real qcluster subprocesses (``manage.py chaos``
runs them at N = 5,000; see docs/reliability.md)."""

from __future__ import annotations

import pytest

from bench import chaos
from tests.support.cluster import assert_survived

pytestmark = [pytest.mark.fault, pytest.mark.e2e, pytest.mark.timeout(240)]


def test_repeated_worker_kills_lose_nothing_and_duplicate_no_child(lab):
    result = chaos.run("repeated_kills", lab, 400, kills=3, interval=1.5, seed=7)
    invariants = assert_survived(result, 400)
    assert result["faults"]["kills"] == 3
    assert invariants["succeeded"] == 400 and invariants["merge_status"] == "SUCCEEDED"
    assert invariants["lease_expiries"] >= 1, "the killed workers' steps were re-run (at-least-once, counted)"
    assert result["faults"]["workers_alive_at_end"] == lab.workers, "the sentinel restarted every killed worker"


def test_a_spawner_killed_mid_spawn_resumes_at_its_cursor(lab):
    result = chaos.run("crash_mid_spawn", lab, 400)
    invariants = assert_survived(result, 400)
    faults = result["faults"]
    assert 100 <= faults["cursor_at_kill"] < 400
    assert faults["spawner_attempts"] == 2 and faults["spawner_lease_expiries"] == 1
    assert invariants["fanout_counters"]["created"] == 400


def test_workers_survive_their_database_sessions_being_terminated(lab):
    result = chaos.run("backend_kill", lab, 400, kills=2, pace=6.0)
    invariants = assert_survived(result, 400)
    assert all(r["sessions_terminated"] >= 1 for r in result["faults"]["rounds"])
    assert invariants["succeeded"] == 400


def test_a_paused_workers_late_results_are_fenced_off(lab):
    result = chaos.run("stale_lease", lab, 400, pace=5.0)
    invariants = assert_survived(result, 400)
    assert result["faults"]["leases_held"] >= 1
    assert invariants["fenced_discards"] >= 1
    assert result["faults"]["late_results_fenced"] >= 1


def test_a_killed_workers_destination_slots_come_back(lab):
    result = chaos.run("destination_slot_crash", lab, 300, kills=1, pace=5.0)
    invariants = assert_survived(result, 300)
    [round_] = result["faults"]["rounds"]
    assert round_["slots_held"] >= 1
    assert result["faults"]["peak_slots_in_use"] <= result["faults"]["concurrency_limit"]
    assert invariants["destination_slots"] == [{"destination": "chaos-destination", "limit": 8, "in_use": 0}]


def test_a_poison_pill_fails_alone_and_the_fan_out_completes(lab):
    result = chaos.run("poison_pill", lab, 300, poison=1, seed=3)
    invariants = assert_survived(result, 300)
    assert invariants["failed"] == 1 and invariants["succeeded"] == 299
    [poisoned] = result["faults"]["poisoned_children"]
    assert poisoned["status"] == "FAILED" and poisoned["attempts"] == poisoned["lease_expiries"] == 3
    assert poisoned["error"].startswith("lease expired 3 times")
    assert invariants["merge_status"] == "SUCCEEDED"
