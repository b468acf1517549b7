"""Paths, templates, placeholders and CHOICE conditions over an execution context."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.dsl import conditions
from workflows.dsl.paths import (
    Path,
    PathNotFound,
    PathSyntaxError,
    check_path,
    is_path_string,
    json_key,
    parse_path,
    placeholder_paths,
    render,
    render_placeholders,
    resolve,
    template_paths,
)

CONTEXT: dict[str, Any] = {
    "input": {
        "order": {"id": "o-1", "lines": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 0}]},
        "flag": False,
        "nothing": None,
        "count": 3,
        "price": 2.5,
        "name": "beta",
        "tags": ["x", "y"],
        "weird-key_1": "ok",
        "one": 1,
        "yes": True,
    },
    "steps": {"fetch": {"output": {"entries": [10, 20, 30], "status": 200}}},
}


# --- parsing ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "segments"), [
    ("$", ()),
    ("$.input", ("input",)),
    ("$.input.order.lines[1].sku", ("input", "order", "lines", 1, "sku")),
    ("$.input.tags[0]", ("input", "tags", 0)),
    ("$[3]", (3,)),
    ("$.input.weird-key_1", ("input", "weird-key_1")),
    ("$.steps.fetch.output.entries[10]", ("steps", "fetch", "output", "entries", 10)),
    ("$.input.a[0][1]", ("input", "a", 0, 1)),
])
def test_parse_path(text: str, segments: tuple[Any, ...]) -> None:
    path = parse_path(text)
    assert path == Path(text, segments)
    assert path.text == text


@pytest.mark.parametrize(("text", "reason"), [
    ("input.a", "a path starts with '$'"),
    ("", "a path starts with '$'"),
    (5, "a path starts with '$'"),
    (None, "a path starts with '$'"),
    ("$.", "unexpected '.' at offset 1"),
    ("$.input..a", "unexpected '..a' at offset 7"),
    ("$.input[x]", "unexpected '[x]' at offset 7"),
    ("$.input[-1]", "unexpected '[-1]' at offset 7"),
    ("$.input.0", "unexpected '.0' at offset 7"),
    ("$.input.a b", "unexpected ' b' at offset 9"),
    ("$input", "unexpected 'input' at offset 1"),
    ("$.input.", "unexpected '.' at offset 7"),
])
def test_parse_path_refuses_malformed_text(text: Any, reason: str) -> None:
    with pytest.raises(PathSyntaxError) as info:
        parse_path(text)
    assert str(info.value) == reason


@pytest.mark.parametrize(("text", "root", "step"), [
    ("$", None, None),
    ("$[0]", None, None),
    ("$.input.a", "input", None),
    ("$.steps.fetch.output", "steps", "fetch"),
    ("$.steps", "steps", None),
    ("$.item.id", "item", None),
])
def test_root_and_step_reference(text: str, root: str | None, step: str | None) -> None:
    path = parse_path(text)
    assert path.root == root
    assert path.step_reference() == step


@pytest.mark.parametrize("text", ["$.input", "$.input.a[0]", "$.steps.fetch.output", "$.steps.a-b.output.x[2]"])
def test_check_path_accepts(text: str) -> None:
    assert check_path(text).text == text


@pytest.mark.parametrize(("text", "allow_item", "reason"), [
    ("$", False, "a path must start with one of $.input, $.steps"),
    ("$[0]", False, "a path must start with one of $.input, $.steps"),
    ("$.context.a", False, "a path must start with one of $.input, $.steps"),
    ("$.item", False, "a path must start with one of $.input, $.steps"),
    ("$.index", False, "a path must start with one of $.input, $.steps"),
    ("$.foo", True, "a path must start with one of $.input, $.steps, $.item, $.index, $.items, $.firstItem"),
    ("$.firstItem.x", True, "$.firstItem is a number and has no parts"),
    ("$.items", False, "a path must start with one of $.input, $.steps"),
    ("$.steps", False, "a step path has the form $.steps.<vertex>.output…"),
    ("$.steps.fetch", False, "a step path has the form $.steps.<vertex>.output…"),
    ("$.steps.fetch.input", False, "a step path has the form $.steps.<vertex>.output…"),
    ("$.steps[0].output", False, "a step path has the form $.steps.<vertex>.output…"),
    ("$.index.x", True, "$.index is a number and has no parts"),
    ("$.index[0]", True, "$.index is a number and has no parts"),
])
def test_check_path_refuses(text: str, allow_item: bool, reason: str) -> None:
    with pytest.raises(PathSyntaxError) as info:
        check_path(text, allow_item=allow_item)
    assert str(info.value) == reason


@pytest.mark.parametrize("text", ["$.item", "$.item.id", "$.item[0].x", "$.index"])
def test_item_paths_are_allowed_only_when_asked(text: str) -> None:
    assert check_path(text, allow_item=True).root in ("item", "index")
    with pytest.raises(PathSyntaxError):
        check_path(text)


@pytest.mark.parametrize(("value", "expected"), [
    ("$", True), ("$.input", True), ("$[0]", True), ("$.", True),
    ("$$.input", False), ("$x", False), ("$5.00", False), ("a$.b", False), ("", False), (" $.input", False),
    (5, False), (None, False), (["$.input"], False),
])
def test_is_path_string(value: Any, expected: bool) -> None:
    assert is_path_string(value) is expected


@pytest.mark.parametrize(("key", "step"), [
    ("name", ".name"),
    ("_x-1", "._x-1"),
    ("odd key", '["odd key"]'),
    ("1st", '["1st"]'),
    ("a.b", '["a.b"]'),
    ('q"uote', '["q\\"uote"]'),
    ("ключ", '["ключ"]'),
    ("", '[""]'),
])
def test_json_key(key: str, step: str) -> None:
    assert json_key(key) == step


# --- resolving --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("$.input.order.id", "o-1"),
    ("$.input.order.lines[1].sku", "B"),
    ("$.input.order.lines[1].qty", 0),
    ("$.input.flag", False),
    ("$.input.nothing", None),
    ("$.input.tags", ["x", "y"]),
    ("$.input.weird-key_1", "ok"),
    ("$.steps.fetch.output.entries[2]", 30),
    ("$", CONTEXT),
])
def test_resolve(text: str, value: Any) -> None:
    assert resolve(text, CONTEXT) == value


def test_resolve_takes_a_parsed_path() -> None:
    assert resolve(parse_path("$.input.count"), CONTEXT) == 3


@pytest.mark.parametrize(("text", "at"), [
    ("$.input.missing", "$.input.missing"),
    ("$.input.order.lines[2]", "$.input.order.lines[2]"),
    ("$.input.order.lines[5].sku", "$.input.order.lines[5]"),
    ("$.input.order[0]", "$.input.order[0]"),  # an index into an object
    ("$.input.tags.first", "$.input.tags.first"),  # a key of a list
    ("$.input.count.digits", "$.input.count.digits"),  # a key of a number
    ("$.input.nothing.x", "$.input.nothing.x"),  # a key of null
    ("$.steps.other.output", "$.steps.other"),
])
def test_resolve_raises_path_not_found(text: str, at: str) -> None:
    with pytest.raises(PathNotFound) as info:
        resolve(text, CONTEXT)
    assert info.value.path == text
    assert str(info.value) == f"path {text}: nothing at {at}"
    assert isinstance(info.value, LookupError)


# --- templates --------------------------------------------------------------------------------

def test_render_replaces_every_path_at_every_depth() -> None:
    template = {
        "id": "$.input.order.id",
        "lines": ["$.input.order.lines[0]", {"n": "$.steps.fetch.output.status"}],
        "constant": {"a": 1, "b": [True, None, 2.5], "c": "plain text"},
    }
    assert render(template, CONTEXT) == {
        "id": "o-1",
        "lines": [{"sku": "A", "qty": 2}, {"n": 200}],
        "constant": {"a": 1, "b": [True, None, 2.5], "c": "plain text"},
    }


def test_render_a_whole_value() -> None:
    assert render("$.input.tags", CONTEXT) == ["x", "y"]
    assert render("$", CONTEXT) is CONTEXT


@pytest.mark.parametrize("value", [None, True, 0, 1.5, "text", "", [], {}])
def test_render_leaves_non_paths_alone(value: Any) -> None:
    assert render(value, CONTEXT) == value


@pytest.mark.parametrize(("template", "expected"), [
    ("$$.input.order.id", "$.input.order.id"),
    ("$$", "$"),
    ("$$$x", "$$x"),
    ("$$x", "$x"),
    ("$x", "$x"),  # not a path, not an escape
    ("$5.00", "$5.00"),
    ("a $.input b", "a $.input b"),
])
def test_render_escapes(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected
    assert render({"v": [template]}, CONTEXT) == {"v": [expected]}


def test_render_does_not_touch_keys() -> None:
    assert render({"$.input.count": "$.input.count"}, CONTEXT) == {"$.input.count": 3}


def test_render_with_a_lookup_callback() -> None:
    seen: list[str] = []

    def lookup(text: str) -> Any:
        seen.append(text)
        return f"<{text}>"

    template = {"a": "$.item.id", "b": ["$.index", "$$.item"], "c": 5}
    assert render(template, {}, lookup) == {"a": "<$.item.id>", "b": ["<$.index>", "$.item"], "c": 5}
    assert seen == ["$.item.id", "$.index"]


def test_render_raises_path_not_found() -> None:
    with pytest.raises(PathNotFound):
        render({"a": ["$.input.missing"]}, CONTEXT)


def test_template_paths_yield_json_path_suffixes() -> None:
    template = {"a": "$.input.x", "b": [1, "$.steps.fetch.output", {"odd key": "$.input.y"}], "c": "$$.input.z",
                "d": "text"}
    assert list(template_paths(template)) == [
        (".a", "$.input.x"),
        (".b[1]", "$.steps.fetch.output"),
        ('.b[2]["odd key"]', "$.input.y"),
    ]
    assert list(template_paths("$.input")) == [("", "$.input")]
    assert list(template_paths(None)) == []


# --- placeholders -----------------------------------------------------------------------------

def test_placeholder_paths() -> None:
    assert placeholder_paths("/orders/{$.input.order.id}/lines/{$.input.count}") == [
        "$.input.order.id", "$.input.count",
    ]
    assert placeholder_paths("/orders/{id}/{}") == []
    assert placeholder_paths("/plain") == []


@pytest.mark.parametrize(("text", "expected"), [
    ("/orders/{$.input.order.id}", "/orders/o-1"),
    ("/orders/{$.input.order.id}/lines/{$.input.count}", "/orders/o-1/lines/3"),
    ("/p/{$.input.price}", "/p/2.5"),
    ("/f/{$.input.flag}", "/f/false"),
    ("/n/{$.input.nothing}", "/n/null"),
    ("/t/{$.input.tags}", "/t/%5B%22x%22%2C%22y%22%5D"),
    ("/s/{$.steps.fetch.output.status}", "/s/200"),
    ("/plain/{id}", "/plain/{id}"),
    ("/", "/"),
])
def test_render_placeholders(text: str, expected: str) -> None:
    assert render_placeholders(text, CONTEXT) == expected


def test_placeholder_values_are_url_quoted() -> None:
    context = {"input": {"name": "a b/c?d=é&x"}}
    assert render_placeholders("/q/{$.input.name}", context) == "/q/a%20b%2Fc%3Fd%3D%C3%A9%26x"


def test_a_missing_placeholder_value_raises_path_not_found() -> None:
    with pytest.raises(PathNotFound):
        render_placeholders("/orders/{$.input.missing}", CONTEXT)


# --- conditions: evaluation -------------------------------------------------------------------

def holds(condition: dict[str, Any], context: dict[str, Any] = CONTEXT) -> bool:
    problems: list[tuple[str, str]] = []
    conditions.check(condition, "$", lambda where, message: problems.append((where, message)))
    assert problems == [], problems  # only evaluate what validation accepts
    return conditions.evaluate(condition, context)


@pytest.mark.parametrize(("operator", "path", "operand", "expected"), [
    ("equals", "$.input.name", "beta", True),
    ("equals", "$.input.name", "Beta", False),
    ("equals", "$.input.order.lines[0]", {"qty": 2, "sku": "A"}, True),
    ("equals", "$.input.tags", ["x", "y"], True),
    ("equals", "$.input.tags", ["y", "x"], False),
    ("equals", "$.input.nothing", None, True),
    ("notEquals", "$.input.name", "beta", False),
    ("notEquals", "$.input.name", "gamma", True),
    ("greaterThan", "$.input.count", 2, True),
    ("greaterThan", "$.input.count", 3, False),
    ("greaterThanOrEquals", "$.input.count", 3, True),
    ("greaterThanOrEquals", "$.input.price", 2.51, False),
    ("lessThan", "$.input.price", 3, True),
    ("lessThan", "$.input.count", 3, False),
    ("lessThanOrEquals", "$.input.count", 3.0, True),
    ("lessThanOrEquals", "$.input.count", 2.99, False),
    ("greaterThan", "$.input.name", "alpha", True),  # strings compare by code point
    ("lessThan", "$.input.name", "Zeta", False),
    ("lessThan", "$.input.name", "gamma", True),
    ("in", "$.input.name", ["alpha", "beta"], True),
    ("in", "$.input.name", ["alpha"], False),
    ("in", "$.input.name", [], False),
    ("in", "$.input.tags", [["x", "y"], "z"], True),
    ("exists", "$.input.name", True, True),
    ("exists", "$.input.name", False, False),
    ("exists", "$.input.nothing", True, True),  # null is a value
    ("exists", "$.input.flag", True, True),
    ("exists", "$.steps.fetch.output.status", True, True),
])
def test_operators(operator: str, path: str, operand: Any, expected: bool) -> None:
    assert holds({"path": path, operator: operand}) is expected


@pytest.mark.parametrize(("path", "operator", "operand", "expected"), [
    ("$.input.yes", "equals", 1, False),  # true is not 1
    ("$.input.one", "equals", True, False),
    ("$.input.flag", "equals", 0, False),  # false is not 0
    ("$.input.yes", "equals", True, True),
    ("$.input.one", "equals", 1.0, True),  # 1 is 1.0
    ("$.input.price", "equals", 2.50, True),
    ("$.input.yes", "notEquals", 1, True),
    ("$.input.one", "notEquals", 1.0, False),
    ("$.input.yes", "in", [1, "true"], False),
    ("$.input.one", "in", [True], False),
    ("$.input.one", "in", [1.0], True),
    ("$.input.yes", "greaterThan", 0, False),  # booleans are not numbers
    ("$.input.one", "greaterThan", "0", False),  # no comparison across kinds
    ("$.input.name", "lessThan", 5, False),
    ("$.input.nothing", "lessThan", 5, False),
    ("$.input.tags", "greaterThan", "a", False),
])
def test_json_semantics(path: str, operator: str, operand: Any, expected: bool) -> None:
    assert holds({"path": path, operator: operand}) is expected


@pytest.mark.parametrize(("value", "operand", "expected"), [
    ({"flag": 1}, {"flag": True}, False),
    ({"flag": True}, {"flag": True}, True),
    ({"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2.0}]}, True),
    ([1, 0], [True, False], False),
    ({"a": 1}, {"a": 1, "b": None}, False),
    ([1], [1, 1], False),
    ({"a": 1}, [1], False),
])
def test_json_semantics_inside_objects_and_lists(value: Any, operand: Any, expected: bool) -> None:
    context = {"input": {"v": value}}
    assert holds({"path": "$.input.v", "equals": operand}, context) is expected
    assert holds({"path": "$.input.v", "in": [operand]}, context) is expected
    assert holds({"path": "$.input.v", "notEquals": operand}, context) is not expected


@pytest.mark.parametrize(("operator", "operand", "expected"), [
    ("equals", None, False),
    ("equals", "x", False),
    ("notEquals", "x", True),
    ("notEquals", None, True),
    ("greaterThan", 0, False),
    ("greaterThanOrEquals", 0, False),
    ("lessThan", 0, False),
    ("lessThanOrEquals", 0, False),
    ("in", [None], False),
    ("exists", True, False),
    ("exists", False, True),
])
@pytest.mark.parametrize("path", ["$.input.missing", "$.input.order.lines[9]", "$.steps.absent.output.x"])
def test_a_missing_path(path: str, operator: str, operand: Any, expected: bool) -> None:
    assert holds({"path": path, operator: operand}) is expected


def test_missing_input_and_steps() -> None:
    assert holds({"path": "$.input.a", "exists": False}, {"input": None, "steps": {}}) is True
    assert holds({"path": "$.steps.x.output", "equals": 1}, {"input": None, "steps": {}}) is False


T = {"path": "$.input.count", "equals": 3}
F = {"path": "$.input.count", "equals": 4}


@pytest.mark.parametrize(("condition", "expected"), [
    ({"and": [T]}, True),
    ({"and": [T, T, T]}, True),
    ({"and": [T, F]}, False),
    ({"or": [F]}, False),
    ({"or": [F, F, T]}, True),
    ({"not": T}, False),
    ({"not": F}, True),
    ({"not": {"not": T}}, True),
    ({"and": [T, {"or": [F, {"not": F}]}]}, True),
    ({"or": [{"and": [T, F]}, {"not": {"or": [T]}}]}, False),
    ({"not": {"path": "$.input.missing", "exists": True}}, True),
])
def test_combinators(condition: dict[str, Any], expected: bool) -> None:
    assert holds(condition) is expected


def test_and_or_short_circuit() -> None:
    # The second condition would raise if evaluated: it is not a validated condition.
    assert conditions.evaluate({"or": [T, {"bogus": 1}]}, CONTEXT) is True
    assert conditions.evaluate({"and": [F, {"bogus": 1}]}, CONTEXT) is False


# --- conditions: validation -------------------------------------------------------------------

def check(condition: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    paths = conditions.check(condition, "$.w", lambda where, message: problems.append((where, message)))
    return paths, problems


def test_check_returns_every_path_read_with_its_json_path() -> None:
    paths, problems = check({"or": [
        {"path": "$.input.a", "exists": True},
        {"and": [{"path": "$.steps.s.output", "equals": 1}, {"not": {"path": "$.input.b", "in": [1]}}]},
    ]})
    assert problems == []
    assert paths == [
        ("$.w.or[0].path", "$.input.a"),
        ("$.w.or[1].and[0].path", "$.steps.s.output"),
        ("$.w.or[1].and[1].not.path", "$.input.b"),
    ]


@pytest.mark.parametrize(("condition", "problems"), [
    ({}, [("$.w", "a condition must be a non-empty object")]),
    ([], [("$.w", "a condition must be a non-empty object")]),
    ({"path": "$.input.a"}, [("$.w", "a condition needs exactly one operator, found 0")]),
    ({"path": "$.input.a", "in": [], "exists": True}, [("$.w", "a condition needs exactly one operator, found 2")]),
    ({"exists": True}, [("$.w", "a condition needs a 'path'")]),
    ({"path": "$.item", "exists": True},
     [("$.w.path", "invalid path: a path must start with one of $.input, $.steps")]),
    ({"path": "$.input.a", "in": "ab"}, [("$.w.in", "'in' takes a list of values")]),
    ({"path": "$.input.a", "exists": "yes"}, [("$.w.exists", "'exists' takes true or false")]),
    ({"path": "$.input.a", "lessThan": None}, [("$.w.lessThan", "'lessThan' compares with a number or a string")]),
    ({"path": "$.input.a", "odd op": 1}, [
        ('$.w["odd op"]', "unknown condition field 'odd op'; operators are equals, notEquals, greaterThan, "
                          "greaterThanOrEquals, lessThan, lessThanOrEquals, in, exists"),
        ("$.w", "a condition needs exactly one operator, found 0"),
    ]),
    ({"and": [T], "or": [T]}, [("$.w", "'and' must be the only field of its condition")]),
    ({"or": []}, [("$.w.or", "'or' takes a non-empty list of conditions")]),
    ({"not": []}, [("$.w.not", "a condition must be a non-empty object")]),
    ({"not": {"and": [T, {}]}}, [("$.w.not.and[1]", "a condition must be a non-empty object")]),
])
def test_check_reports(condition: Any, problems: list[tuple[str, str]]) -> None:
    assert check(condition)[1] == problems


@pytest.mark.parametrize("operand", [0, -1.5, "", "text"])
def test_comparisons_take_numbers_and_strings(operand: Any) -> None:
    assert check({"path": "$.input.a", "greaterThan": operand})[1] == []


@pytest.mark.parametrize("operand", [None, True, [1], {"a": 1}, "s", 0])
def test_equals_takes_any_json_value(operand: Any) -> None:
    assert check({"path": "$.input.a", "equals": operand})[1] == []
