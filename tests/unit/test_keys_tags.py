"""Issue 31 §4 without a database: the SPAWNER's itemKey in the DSL (JSON-path errors, the
hash of documents without it unchanged) and the rules of tags (workflows/tags.py)."""

from __future__ import annotations

import copy
import json

import pytest

from workflows import tags
from workflows.dsl import canonical, content_hash, parse
from workflows.dsl.errors import DslError
from workflows.errors import Invalid

BASE = {"start": "s", "vertices": {"s": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child"}}}


def with_spawner(**fields):
    doc = copy.deepcopy(BASE)
    doc["vertices"]["s"].update(fields)
    return doc


def errors_of(doc) -> list[tuple[str, str]]:
    with pytest.raises(DslError) as caught:
        parse(doc)
    return [(path, message) for path, message in caught.value.errors]


def test_item_key_is_parsed_and_hashed_only_when_set():
    assert parse(with_spawner(itemKey="$.item.id")).vertices["s"].item_key == "$.item.id"
    assert canonical(with_spawner(itemKey=None)) == canonical(BASE)
    assert b"itemKey" not in canonical(BASE)
    form = json.loads(canonical(with_spawner(itemKey="$.item.id")))["vertices"]["s"]
    assert form["itemKey"] == "$.item.id"
    assert len({content_hash(BASE), content_hash(with_spawner(itemKey="$.item.id")),
                content_hash(with_spawner(itemKey="$.item.ref"))}) == 3


@pytest.mark.parametrize(("fields", "message"), [
    ({"itemKey": 42}, "must be a path into the item"),
    ({"itemKey": "id"}, "must be a path into the item"),
    ({"itemKey": "$.item.id!"}, "invalid path"),
    ({"itemKey": "$.input.id"}, "use a path starting with $.item"),
    ({"itemKey": "$.index"}, "use a path starting with $.item"),
    ({"itemKey": "$.item.id", "itemsPerChild": 5}, "with itemsPerChild 5"),
])
def test_a_bad_item_key_is_reported_at_its_json_path(fields, message):
    found = errors_of(with_spawner(**fields))
    assert [path for path, _ in found] == ["$.vertices.s.itemKey"], found
    assert message in found[0][1], found


def test_tags_are_checked_and_each_bad_one_named():
    assert tags.check(None) == {} and tags.check({"customer": "acme", "region.x-1_": ""}) == {
        "customer": "acme", "region.x-1_": ""}
    assert tags.check({f"k{i}": "v" for i in range(20)})
    cases = [
        ({f"k{i}": "v" for i in range(21)}, "tags", "at most 20 tags"),
        ({"Customer": "acme"}, "tags.Customer", "a tag key is 1-64"),
        ({"k" * 65: "v"}, "tags." + "k" * 65, "a tag key is 1-64"),
        ({"": "v"}, "tags.", "a tag key is 1-64"),
        ({"n": 1}, "tags.n", "a string"),
        ({"long": "x" * 257}, "tags.long", "at most 256 characters"),
        ({"nul": "a\x00b"}, "tags.nul", "NUL"),
    ]
    for value, field, message in cases:
        with pytest.raises(Invalid) as caught:
            tags.check(value)
        assert caught.value.errors[0]["field"] == field, (value, caught.value.errors)
        assert message in caught.value.errors[0]["message"], caught.value.errors
    with pytest.raises(Invalid, match="an object"):
        tags.check(["customer:acme"])
    assert tags.check({"v": "x" * 256})


def test_search_terms_split_at_the_first_colon_and_must_agree():
    assert tags.search(["customer:acme", "url:http://x:1"]) == [{"customer": "acme", "url": "http://x:1"}]
    assert tags.search(["empty:"]) == [{"empty": ""}] and tags.search([]) == []
    for bad, message in [("acme", "not key:value"), ("Bad:x", "a tag key"), (":x", "a tag key"),
                         ("k:" + "x" * 257, "at most 256")]:
        with pytest.raises(Invalid, match=message):
            tags.search([bad])
    assert tags.search(["region:eu", "region:us"]) == [{"region": "eu"}, {"region": "us"}], "matches nothing"
    assert tags.search(["region:eu", "region:eu"]) == [{"region": "eu"}]
    with pytest.raises(Invalid, match="at most 20"):
        tags.search([f"k{i}:v" for i in range(21)])


def test_command_line_pairs():
    assert tags.from_pairs(["customer=acme", "eq=a=b"]) == {"customer": "acme", "eq": "a=b"}
    with pytest.raises(Invalid, match="key=value"):
        tags.from_pairs(["customer"])
    with pytest.raises(Invalid) as caught:
        tags.from_pairs(["Bad=x"])
    assert caught.value.errors[0]["field"] == "tags.Bad"


def test_the_input_diff_lists_each_changed_path():
    from executions.selectors.identity import Change, diff

    before = {"id": "e-1", "fail": True, "lines": [1, 2, 3], "gone": "x", "same": {"a": 1}}
    after = {"id": "e-1", "fail": False, "lines": [1, 5], "same": {"a": 1}, "new": None, "n": 1.0}
    assert diff(before, after) == [
        Change("$.fail", "true", "false"), Change("$.lines[1]", "2", "5"), Change("$.lines[2]", "3", ""),
        Change("$.gone", '"x"', ""), Change("$.new", "", "null"), Change("$.n", "", "1.0")]
    assert diff({"a": 1}, {"a": 1.0}) == [Change("$.a", "1", "1.0")], "1 and 1.0 are different JSON"
    assert diff([1], {"a": 1}) == [Change("$", "[1]", '{"a": 1}')]
    assert diff({"k": 1}, {"k": 1}) == []
    assert len(diff({f"k{i}": i for i in range(500)}, {})) == 101, "bounded"


def test_the_shared_error_prefix_ends_at_a_word():
    from executions.ui.children_table import shared_prefix

    same = "t failed: RuntimeError: ledger refused entry e-1: HTTP 409 duplicate"
    assert shared_prefix([same, same]) == "t failed: RuntimeError: ledger refused entry e-1: HTTP 409 "
    assert shared_prefix([same, same.replace("e-1", "e-22"), ""]) == "t failed: RuntimeError: ledger refused entry "
    assert shared_prefix([same]) == "" and shared_prefix(["abc def ghi", "abc dxx"]) == ""
