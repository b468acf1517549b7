"""Quorum merges in the DSL and the rule (S26, issue 31 §3): minSuccessful / minSuccessfulRatio,
one of the two, each problem at its JSON path; a document without a quorum keeps its hash; the
quorum over N children is exact."""

from __future__ import annotations

from typing import Any

import pytest

from executions.core import merge_rule
from workflows.dsl import DslError, content_hash, parse
from workflows.dsl.ast import Merge


def doc(config: dict[str, Any] | None) -> dict[str, Any]:
    merge: dict[str, Any] = {"type": "MERGE", "spawner": "fan"}
    if config is not None:
        merge["config"] = config
    return {"start": "fan", "vertices": {"fan": {"type": "SPAWNER", "items": "$.input.items", "workflow": "c",
                                                 "next": "join"}, "join": merge}}


def errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(DslError) as raised:
        parse(document)
    return list(raised.value.errors)


def merge_of(config: dict[str, Any]) -> Merge:
    vertex = parse(doc(config)).vertices["join"]
    assert isinstance(vertex, Merge)
    return vertex


@pytest.mark.parametrize(("config", "where", "fragment"), [
    ({"minSuccessful": 0}, "$.vertices.join.config.minSuccessful", "integer from 1"),
    ({"minSuccessful": 1.5}, "$.vertices.join.config.minSuccessful", "integer from 1"),
    ({"minSuccessful": "3"}, "$.vertices.join.config.minSuccessful", "integer from 1"),
    ({"minSuccessful": True}, "$.vertices.join.config.minSuccessful", "integer from 1"),
    ({"minSuccessfulRatio": 0}, "$.vertices.join.config.minSuccessfulRatio", "greater than 0 and at most 1"),
    ({"minSuccessfulRatio": 1.01}, "$.vertices.join.config.minSuccessfulRatio", "greater than 0 and at most 1"),
    ({"minSuccessful": 2, "minSuccessfulRatio": 0.5}, "$.vertices.join.config.minSuccessfulRatio", "not both"),
    ({"minSuccessful": 2, "tolerateChildFailures": ["FAILED"], "failureTolerance": {"maxFailureRatio": 0.1}},
     "$.vertices.join.config.tolerateChildFailures", "cannot be combined with minSuccessful"),
    ({"minSuccessfulRatio": 0.5, "tolerateChildFailures": ["FAILED"]},
     "$.vertices.join.config.tolerateChildFailures", "cannot be combined with minSuccessfulRatio"),
    ({"minSuccessful": 2, "failFast": False}, "$.vertices.join.config.failFast", "cannot be false"),
])
def test_a_bad_quorum_is_refused_at_its_path(config, where, fragment):
    found = errors(doc(config))
    assert any(path == where and fragment in message for path, message in found), found


def test_a_quorum_is_parsed_and_fails_fast():
    assert (merge_of({"minSuccessful": 3}).min_successful, merge_of({"minSuccessful": 3}).fail_fast) == (3, True)
    ratio = merge_of({"minSuccessfulRatio": 0.25})
    assert (ratio.min_successful, ratio.min_successful_ratio, ratio.quorum) == (None, 0.25, True)
    assert not merge_of({}).quorum


def test_documents_without_a_quorum_keep_their_canonical_form_and_hash():
    plain = parse(doc({"failFast": True}))
    assert "minSuccessful" not in str(plain.vertices["join"].to_dict())
    assert content_hash(doc({"failFast": True})) == content_hash(doc({"failFast": True, "minSuccessful": None}))


def test_a_quorum_changes_the_hash_and_equal_quorums_hash_alike():
    base = content_hash(doc(None))
    assert content_hash(doc({"minSuccessful": 2})) != base
    assert content_hash(doc({"minSuccessful": 2})) == content_hash(doc({"minSuccessful": 2, "failFast": True}))
    assert content_hash(doc({"minSuccessful": 2})) != content_hash(doc({"minSuccessfulRatio": 0.5}))


@pytest.mark.parametrize(("given", "ratio", "total", "needed"), [
    (3, None, 10, 3), (None, 0.3, 10, 3), (None, 0.29, 100, 29), (None, 0.5, 5, 3), (None, 1.0, 7, 7),
    (None, 0.01, 1, 1), (None, 0.5, 0, 0), (None, None, 10, None), (20, None, 10, 20),
])
def test_the_quorum_over_n_children_is_exact(given, ratio, total, needed):
    assert merge_rule.quorum_of(given, ratio, total) == needed


def test_a_quorum_merges_counts_name_the_children_never_started():
    fan = {"succeeded": 3, "failed": 1, "cancelled": 2, "total": 10, "min_successful": 3}
    assert merge_rule.merge_counts(fan) == {"SUCCEEDED": 3, "FAILED": 1, "CANCELLED": 2, "NOT_STARTED": 4}
    assert "NOT_STARTED" not in merge_rule.merge_counts({**fan, "min_successful": None})


@pytest.mark.parametrize(("config", "valid"), [
    ({"minSuccessful": 2}, True), ({"minSuccessfulRatio": 0.5}, True), ({"failFast": True}, True),
    ({"minSuccessful": 0}, False), ({"minSuccessfulRatio": 0}, False), ({"minSuccessfulRatio": 1.5}, False),
])
def test_the_documents_json_schema_states_the_quorum(config, valid):
    import jsonschema

    from workflows.dsl.schema import DOCUMENT
    found = list(jsonschema.Draft202012Validator(DOCUMENT).iter_errors(doc(config)))
    assert (not found) == valid, found
