"""failureTolerance.maxFailures (issue 31): an optional count beside maxFailureRatio. Documents
without it keep their hashes (the golden fixtures in test_dsl_hash.py); with it, the logic —
and so the hash — differs; ``null`` is the same as absent."""

from __future__ import annotations

import copy
from typing import Any

from workflows.dsl import canonical, content_hash, parse

DOC: dict[str, Any] = {"start": "fan", "vertices": {
    "fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done",
             "config": {"tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.05},
                        "failFast": True}},
    "done": {"type": "SUCCEED"}}}


def _with(tolerance: dict[str, Any], tolerated: list[str] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["vertices"]["join"]["config"]["failureTolerance"] = tolerance
    if tolerated is not None:
        doc["vertices"]["join"]["config"]["tolerateChildFailures"] = tolerated
    return doc


def test_a_count_changes_the_logic_and_the_hash_and_null_is_absent() -> None:
    plain = content_hash(DOC)
    assert content_hash(_with({"maxFailureRatio": 0.05, "maxFailures": None})) == plain
    counted = _with({"maxFailureRatio": 0.05, "maxFailures": 3})
    assert content_hash(counted) != plain
    assert b'"maxFailures":3' in canonical(counted)
    assert parse(counted).vertices["join"].max_failures == 3  # type: ignore[attr-defined]


def test_a_count_without_a_tolerated_status_has_no_effect_and_no_hash_of_its_own() -> None:
    untolerated = _with({"maxFailureRatio": 0.05}, tolerated=[])
    assert content_hash(_with({"maxFailures": 3}, tolerated=[])) == content_hash(untolerated)
