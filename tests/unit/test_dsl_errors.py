"""Every kind of DSL error, with the exact JSON path it is reported at.

Most tests take one valid document holding every vertex kind, break exactly one thing and
check that exactly that one problem is reported — so a spurious extra error fails too.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from workflows.dsl import DslError, canonical, content_hash, parse

KINDS = ("TASK", "HTTP", "SPAWNER", "MERGE", "TIMER", "WAIT", "CHOICE", "CHAIN", "SUCCEED", "FAIL")


def full_doc() -> dict[str, Any]:
    """A valid workflow with one vertex of every kind (vertex id = kind in lower case)."""
    return {
        "start": "task",
        "vertices": {
            "task": {"type": "TASK", "handler": "demo.echo", "next": "http"},
            "http": {"type": "HTTP", "destination": "api", "next": "spawner"},
            "spawner": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "merge"},
            "merge": {"type": "MERGE", "spawner": "spawner", "next": "timer"},
            "timer": {"type": "TIMER", "seconds": 1, "next": "wait"},
            "wait": {"type": "WAIT", "for": "callback", "timeoutSeconds": 60, "next": "choice"},
            "choice": {
                "type": "CHOICE",
                "choices": [{"when": {"path": "$.input.stop", "equals": True}, "next": "fail"}],
                "default": "chain",
            },
            "chain": {"type": "CHAIN", "workflow": "self", "next": "succeed"},
            "succeed": {"type": "SUCCEED"},
            "fail": {"type": "FAIL"},
        },
    }


def changed(vertex: str, **fields: Any) -> dict[str, Any]:
    """``full_doc()`` with fields of one vertex set (a value of ``...`` removes the field)."""
    doc = full_doc()
    for key, value in fields.items():
        if value is ...:
            doc["vertices"][vertex].pop(key, None)
        else:
            doc["vertices"][vertex][key] = value
    return doc


def when(condition: Any) -> dict[str, Any]:
    """``full_doc()`` with the CHOICE's first condition replaced."""
    doc = full_doc()
    doc["vertices"]["choice"]["choices"][0]["when"] = condition
    return doc


def small(start: str = "a", **vertices: Any) -> dict[str, Any]:
    return {"start": start, "vertices": vertices}


TASK = {"type": "TASK", "handler": "demo.echo"}
END = {"type": "SUCCEED"}


def errors_of(doc: Any) -> list[tuple[str, str]]:
    with pytest.raises(DslError) as info:
        parse(doc)
    return info.value.errors


def only_error(doc: Any) -> tuple[str, str]:
    errors = errors_of(doc)
    assert len(errors) == 1, errors
    return errors[0]


def assert_only(doc: Any, path: str, fragment: str) -> None:
    where, message = only_error(doc)
    assert where == path
    assert fragment in message


def assert_reported(doc: Any, path: str, fragment: str) -> None:
    errors = errors_of(doc)
    assert any(where == path and fragment in message for where, message in errors), errors


def test_the_base_document_is_valid() -> None:
    workflow = parse(full_doc())
    assert sorted(v.type for v in workflow.vertices.values()) == sorted(KINDS)


# --- the document -----------------------------------------------------------------------------

@pytest.mark.parametrize("doc", [[], "workflow", None, 5, True, [full_doc()]])
def test_a_document_that_is_not_an_object(doc: Any) -> None:
    assert errors_of(doc) == [("$", "a workflow must be a JSON object")]


def test_an_unknown_top_level_field() -> None:
    doc = {**full_doc(), "version": 2, "my notes": "x"}
    assert errors_of(doc) == [
        ("$.version", "unknown field 'version'; a workflow has 'start' and 'vertices'"),
        ('$["my notes"]', "unknown field 'my notes'; a workflow has 'start' and 'vertices'"),
    ]


def test_a_missing_start() -> None:
    doc = full_doc()
    del doc["start"]
    assert errors_of(doc) == [("$.start", "'start' is required")]


@pytest.mark.parametrize("start", [5, ["task"], {"id": "task"}, True])
def test_a_start_that_is_not_a_string(start: Any) -> None:
    assert errors_of({**full_doc(), "start": start}) == [("$.start", "must be a vertex id")]


def test_a_start_naming_no_vertex() -> None:
    assert errors_of({**full_doc(), "start": "begin"}) == [("$.start", "names no vertex: 'begin'")]


def test_missing_vertices() -> None:
    assert errors_of({"start": "a"}) == [("$.vertices", "must be a non-empty object of vertices")]


@pytest.mark.parametrize("vertices", [[], [TASK], "task", None])
def test_vertices_that_are_not_an_object(vertices: Any) -> None:
    assert errors_of({"start": "a", "vertices": vertices}) == [
        ("$.vertices", "must be a non-empty object of vertices"),
    ]


def test_empty_vertices() -> None:
    assert errors_of({"start": "a", "vertices": {}}) == [
        ("$.vertices", "must be a non-empty object of vertices"),
        ("$.start", "names no vertex: 'a'"),
    ]


# --- vertices ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("vertex_id", "path"), [
    ("has space", '$.vertices["has space"]'),
    ("1st", '$.vertices["1st"]'),
    ("dotted.id", '$.vertices["dotted.id"]'),
    ("", '$.vertices[""]'),
    ("a" * 65, "$.vertices." + "a" * 65),
])
def test_a_bad_vertex_id(vertex_id: str, path: str) -> None:
    doc = small(a=TASK)
    doc["vertices"][vertex_id] = END
    assert_only(doc, path, "a vertex id is 1-64 letters, digits, '_' or '-', starting with a letter or '_'")


def test_vertex_ids_at_the_limits_are_valid() -> None:
    longest = "_" + "a" * 63
    parse(small(a={**TASK, "next": "b-2"}, **{"b-2": {**TASK, "next": longest}, longest: END}))


@pytest.mark.parametrize("raw", ["TASK", ["TASK"], None, 5])
def test_a_vertex_that_is_not_an_object(raw: Any) -> None:
    doc = full_doc()
    doc["vertices"]["extra"] = raw
    assert_only(doc, "$.vertices.extra", "a vertex must be a JSON object")


@pytest.mark.parametrize(("kind", "shown"), [("LAMBDA", "'LAMBDA'"), ("task", "'task'"), (None, "None"), (3, "3"),
                                             ({}, "{}"), (["TASK"], "['TASK']")])
def test_an_unknown_vertex_type(kind: Any, shown: str) -> None:
    assert_only(changed("succeed", type=kind), "$.vertices.succeed.type",
                f"unknown vertex type {shown}; expected one of {', '.join(KINDS)}")


def test_a_vertex_without_a_type() -> None:
    assert_only(changed("succeed", type=...), "$.vertices.succeed.type", "unknown vertex type None")


@pytest.mark.parametrize(("vertex", "field"), [
    ("task", "foo"),
    ("task", "items"),
    ("http", "handler"),
    ("spawner", "handler"),
    ("spawner", "spawner"),
    ("merge", "retry"),
    ("merge", "timeoutSeconds"),
    ("timer", "retry"),
    ("timer", "timeoutSeconds"),
    ("choice", "retry"),
    ("choice", "next"),
    ("chain", "handler"),
    ("succeed", "retry"),
    ("succeed", "next"),
    ("fail", "retry"),
    ("fail", "next"),
    ("fail", "output"),
])
def test_an_unknown_field_for_the_vertex_kind(vertex: str, field: str) -> None:
    kind = vertex.upper()
    assert_only(changed(vertex, **{field: "succeed"}), f"$.vertices.{vertex}.{field}",
                f"unknown field '{field}' for a {kind} vertex")


def test_an_unknown_field_with_an_odd_name() -> None:
    assert_only(changed("task", **{"on error": 1}), '$.vertices.task["on error"]',
                "unknown field 'on error' for a TASK vertex")


# --- required fields --------------------------------------------------------------------------

@pytest.mark.parametrize(("vertex", "field"), [
    ("task", "handler"),
    ("http", "destination"),
    ("spawner", "items"),
    ("merge", "spawner"),
    ("chain", "workflow"),
])
def test_a_required_field_is_missing(vertex: str, field: str) -> None:
    assert_only(changed(vertex, **{field: ...}), f"$.vertices.{vertex}", f"'{field}' is required")


def test_a_required_field_given_as_null_is_missing() -> None:
    assert_only(changed("task", handler=None), "$.vertices.task", "'handler' is required")


def test_a_spawner_needs_a_workflow_or_a_version() -> None:
    assert_only(changed("spawner", workflow=...), "$.vertices.spawner",
                "a SPAWNER needs 'workflow' (a key) or 'version' (a hash)")


@pytest.mark.parametrize("choices", [..., [], "fail", {"when": {}, "next": "fail"}])
def test_a_choice_needs_choices(choices: Any) -> None:
    doc = changed("choice", choices=choices)
    # The rule's target is no longer reachable either: both are reported.
    assert errors_of(doc) == [
        ("$.vertices.choice.choices", "must be a non-empty list of {when, next}"),
        ("$.vertices.fail", "unreachable from start 'task'"),
    ]


# --- bad values -------------------------------------------------------------------------------

@pytest.mark.parametrize("handler", ["echo", "demo.", ".echo", "demo echo", "demo.echo()", "1demo.echo", "", 5])
def test_a_bad_handler_name(handler: Any) -> None:
    assert_only(changed("task", handler=handler), "$.vertices.task.handler",
                "must be a dotted handler name such as 'demo.echo'")


@pytest.mark.parametrize("vertex", ["task", "http"])
@pytest.mark.parametrize("destination", ["bad name", "-api", "", 7, "x" * 101])
def test_a_bad_destination_name(vertex: str, destination: Any) -> None:
    assert_only(changed(vertex, destination=destination), f"$.vertices.{vertex}.destination",
                "must be a destination name")


@pytest.mark.parametrize("method", ["FETCH", "get", "HEAD", 5, ""])
def test_a_bad_http_method(method: Any) -> None:
    assert_only(changed("http", method=method), "$.vertices.http.method",
                "must be one of GET, POST, PUT, PATCH, DELETE")


@pytest.mark.parametrize("path", ["orders", "https://example.com/orders", "", "{$.input.id}"])
def test_an_http_path_not_starting_with_a_slash(path: str) -> None:
    assert_only(changed("http", path=path), "$.vertices.http.path", "must start with '/'")


def test_an_http_path_that_is_not_a_string() -> None:
    assert_only(changed("http", path=5), "$.vertices.http.path", "must be a string starting with '/'")


@pytest.mark.parametrize("headers", [{"X-Count": 5}, {"X-Flag": True}, {"X-Id": None}, {"X-A": ["a"]},
                                     ["X-A"], [], "X-A: 1", 0])
def test_bad_header_values(headers: Any) -> None:
    assert_only(changed("http", headers=headers), "$.vertices.http.headers",
                "must be an object of header names to string values")


@pytest.mark.parametrize("items", ["entries", "input.entries", 5, ["$.input.a"], ""])
def test_spawner_items_that_are_not_a_path(items: Any) -> None:
    assert_only(changed("spawner", items=items), "$.vertices.spawner.items", "must be a path such as '$.input.entries'")


@pytest.mark.parametrize("workflow", ["bad key", "-child", "", 5, "k" * 129])
def test_a_bad_spawner_workflow_key(workflow: Any) -> None:
    errors = errors_of(changed("spawner", workflow=workflow))
    assert errors == [
        ("$.vertices.spawner.workflow", "must be a workflow key"),
        ("$.vertices.spawner", "a SPAWNER needs 'workflow' (a key) or 'version' (a hash)"),
    ]


@pytest.mark.parametrize("version", ["abc", "A" * 64, "0" * 63, "g" * 64, 12])
def test_a_bad_spawner_version_hash(version: Any) -> None:
    assert_reported(changed("spawner", version=version), "$.vertices.spawner.version",
                    "must be a 64-character hex version hash")


@pytest.mark.parametrize("workflow", ["bad key", "", 5])
def test_a_bad_chain_workflow(workflow: Any) -> None:
    assert_only(changed("chain", workflow=workflow), "$.vertices.chain.workflow", 'must be a workflow key or "self"')


@pytest.mark.parametrize(("field", "value"), [("error", 5), ("cause", ["x"])])
def test_bad_fail_fields(field: str, value: Any) -> None:
    assert_only(changed("fail", **{field: value}), f"$.vertices.fail.{field}", "must be a string")


# --- edges and the graph ----------------------------------------------------------------------

def test_next_naming_a_missing_vertex() -> None:
    assert_only(small(a={**TASK, "next": "nowhere"}), "$.vertices.a.next", "names no vertex: 'nowhere'")


@pytest.mark.parametrize("target", ["", "has space", 5, ["b"]])
def test_next_that_is_not_a_vertex_id(target: Any) -> None:
    assert_only(small(a={**TASK, "next": target}), "$.vertices.a.next", "must be a vertex id")


def test_a_choice_rule_naming_a_missing_vertex() -> None:
    assert_only(changed("choice", choices=[{"when": {"path": "$.input.stop", "equals": True}, "next": "fail"},
                                           {"when": {"path": "$.input.x", "exists": True}, "next": "nowhere"}]),
                "$.vertices.choice.choices[1].next", "names no vertex: 'nowhere'")


def test_a_choice_default_naming_a_missing_vertex() -> None:
    doc = changed("choice", default="nowhere")
    # chain and succeed were reached only through the default.
    assert errors_of(doc) == [
        ("$.vertices.choice.default", "names no vertex: 'nowhere'"),
        ("$.vertices.chain", "unreachable from start 'task'"),
        ("$.vertices.succeed", "unreachable from start 'task'"),
    ]


@pytest.mark.parametrize("target", ["", "has space"])
def test_a_choice_default_that_is_not_a_vertex_id(target: str) -> None:
    assert_reported(changed("choice", default=target), "$.vertices.choice.default", "must be a vertex id")


def test_a_choice_rule_without_next() -> None:
    doc = changed("choice", choices=[{"when": {"path": "$.input.stop", "equals": True}}])
    assert_reported(doc, "$.vertices.choice.choices[0]", "'next' is required")


def test_a_choice_rule_with_an_empty_next() -> None:
    doc = changed("choice", choices=[{"when": {"path": "$.input.stop", "equals": True}, "next": ""}])
    assert_reported(doc, "$.vertices.choice.choices[0].next", "must be a vertex id")


@pytest.mark.parametrize("rule", ["fail", None, ["when", "next"]])
def test_a_choice_rule_that_is_not_an_object(rule: Any) -> None:
    assert_reported(changed("choice", choices=[rule]), "$.vertices.choice.choices[0]",
                    "must be an object with 'when' and 'next'")


def test_an_unknown_field_in_a_choice_rule() -> None:
    doc = full_doc()
    doc["vertices"]["choice"]["choices"][0]["then"] = "fail"
    assert_only(doc, "$.vertices.choice.choices[0].then", "unknown field 'then' in a choice")


def test_unreachable_vertices() -> None:
    doc = small(a=TASK, b={**TASK, "next": "c"}, c=END)
    assert errors_of(doc) == [
        ("$.vertices.b", "unreachable from start 'a'"),
        ("$.vertices.c", "unreachable from start 'a'"),
    ]


def test_a_cycle() -> None:
    doc = small(a={**TASK, "next": "b"}, b={**TASK, "next": "c"}, c={**TASK, "next": "a"})
    assert_only(doc, "$.vertices.c.next", "creates a cycle a -> b -> c -> a; loops must be expressed with CHAIN")


def test_a_self_loop() -> None:
    assert_only(small(a={**TASK, "next": "a"}), "$.vertices.a.next",
                "creates a cycle a -> a; loops must be expressed with CHAIN")


def test_a_cycle_through_a_choice() -> None:
    doc = small(
        a={"type": "TIMER", "seconds": 5, "next": "b"},
        b={"type": "CHOICE", "choices": [{"when": {"path": "$.input.done", "equals": True}, "next": "c"}],
           "default": "a"},
        c=END,
    )
    assert_only(doc, "$.vertices.b.default", "creates a cycle a -> b -> a; loops must be expressed with CHAIN")


# --- MERGE ------------------------------------------------------------------------------------

def test_a_merge_of_a_missing_vertex() -> None:
    assert_only(changed("merge", spawner="ghost"), "$.vertices.merge.spawner", "names no vertex: 'ghost'")


def test_a_merge_of_a_vertex_that_is_not_a_spawner() -> None:
    assert_only(changed("merge", spawner="task"), "$.vertices.merge.spawner", "'task' is a TASK, not a SPAWNER")


@pytest.mark.parametrize("spawner", ["", "has space", 5])
def test_a_merge_spawner_that_is_not_a_vertex_id(spawner: Any) -> None:
    assert_only(changed("merge", spawner=spawner), "$.vertices.merge.spawner", "must be a SPAWNER vertex id")


def test_a_merge_whose_spawner_is_not_upstream() -> None:
    doc = small(
        a={"type": "CHOICE", "choices": [{"when": {"path": "$.input.fan", "equals": True}, "next": "s"}],
           "default": "m"},
        s={"type": "SPAWNER", "items": "$.input.items", "workflow": "child"},
        m={"type": "MERGE", "spawner": "s"},
    )
    assert_only(doc, "$.vertices.m.spawner", "SPAWNER 's' is not upstream of this MERGE")


def test_a_merge_before_its_spawner() -> None:
    doc = small(
        a={"type": "MERGE", "spawner": "s", "next": "s"},
        s={"type": "SPAWNER", "items": "$.input.items", "workflow": "child"},
    )
    assert_only(doc, "$.vertices.a.spawner", "SPAWNER 's' is not upstream of this MERGE")


def test_a_spawner_merged_twice() -> None:
    doc = small(
        s={"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "m1"},
        m1={"type": "MERGE", "spawner": "s", "next": "m2"},
        m2={"type": "MERGE", "spawner": "s"},
        start="s",
    )
    assert_only(doc, "$.vertices.m2.spawner", "SPAWNER 's' is already joined by MERGE 'm1'")


def merge_config(**config: Any) -> dict[str, Any]:
    return changed("merge", config=config)


@pytest.mark.parametrize("ratio", [1.5, -0.1, 2, "5%", True, [0.1], {"value": 0.1}, 1.0000001])
def test_a_max_failure_ratio_outside_zero_one_or_not_a_number(ratio: Any) -> None:
    doc = merge_config(tolerateChildFailures=["FAILED"], failureTolerance={"maxFailureRatio": ratio})
    assert_only(doc, "$.vertices.merge.config.failureTolerance.maxFailureRatio",
                "must be a number at least 0 and at most 1")


@pytest.mark.parametrize("ratio", [0, 0.0, 1, 0.29])
def test_max_failure_ratios_at_and_inside_the_bounds_are_valid(ratio: float) -> None:
    parse(merge_config(tolerateChildFailures=["FAILED"], failureTolerance={"maxFailureRatio": ratio}))


def test_a_bad_ratio_is_reported_even_when_nothing_is_tolerated() -> None:
    assert_only(merge_config(failureTolerance={"maxFailureRatio": 7}),
                "$.vertices.merge.config.failureTolerance.maxFailureRatio", "must be a number")


@pytest.mark.parametrize(("statuses", "index", "shown"), [
    (["SUCCEEDED"], 0, "'SUCCEEDED'"),
    (["FAILED", "failed"], 1, "'failed'"),
    (["CANCELLED", "TIMED_OUT"], 1, "'TIMED_OUT'"),
    ([None], 0, "None"),
])
def test_unknown_tolerated_statuses(statuses: list[Any], index: int, shown: str) -> None:
    assert_only(merge_config(tolerateChildFailures=statuses),
                f"$.vertices.merge.config.tolerateChildFailures[{index}]",
                f"unknown status {shown}; expected CANCELLED or FAILED")


@pytest.mark.parametrize("statuses", ["FAILED", {"FAILED": True}, 0, False])
def test_tolerated_statuses_that_are_not_a_list(statuses: Any) -> None:
    assert_only(merge_config(tolerateChildFailures=statuses), "$.vertices.merge.config.tolerateChildFailures",
                "must be a list of statuses")


@pytest.mark.parametrize("config", [[], "failFast", 0, False])
def test_a_merge_config_that_is_not_an_object(config: Any) -> None:
    assert_only(changed("merge", config=config), "$.vertices.merge.config", "must be an object")


@pytest.mark.parametrize("tolerance", [0.05, [], "5%"])
def test_a_failure_tolerance_that_is_not_an_object(tolerance: Any) -> None:
    assert_only(merge_config(failureTolerance=tolerance), "$.vertices.merge.config.failureTolerance",
                "must be an object with maxFailureRatio")


@pytest.mark.parametrize("fail_fast", ["yes", 1, 0, []])
def test_a_fail_fast_that_is_not_a_boolean(fail_fast: Any) -> None:
    assert_only(merge_config(failFast=fail_fast), "$.vertices.merge.config.failFast", "must be true or false")


def test_unknown_fields_in_config_and_failure_tolerance() -> None:
    # (maxFailures became a field in issue 31: the unknown one here is maxFailureCount.)
    doc = merge_config(failRatio=0.1, failureTolerance={"maxFailureRatio": 0.1, "maxFailureCount": 3})
    assert errors_of(doc) == [
        ("$.vertices.merge.config.failRatio", "unknown field 'failRatio' in MERGE config"),
        ("$.vertices.merge.config.failureTolerance.maxFailureCount",
         "unknown field 'maxFailureCount' in failureTolerance"),
    ]


@pytest.mark.parametrize("count", [-1, 1.5, "3", True])
def test_a_max_failures_that_is_not_a_whole_number(count: Any) -> None:
    doc = merge_config(tolerateChildFailures=["FAILED"], failureTolerance={"maxFailures": count})
    assert_only(doc, "$.vertices.merge.config.failureTolerance.maxFailures", "must be an integer from 0 to")


# --- retry and timeoutSeconds -----------------------------------------------------------------

@pytest.mark.parametrize("vertex", ["task", "http", "spawner", "chain"])
def test_an_unknown_field_in_retry(vertex: str) -> None:
    assert_only(changed(vertex, retry={"maxRetries": 3}), f"$.vertices.{vertex}.retry.maxRetries",
                "unknown field 'maxRetries' in retry")


@pytest.mark.parametrize("retry", [3, [3], "3", True])
def test_a_retry_that_is_not_an_object(retry: Any) -> None:
    assert_only(changed("task", retry=retry), "$.vertices.task.retry",
                "must be an object with maxAttempts, backoffSeconds, backoffMultiplier, jitter")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("maxAttempts", 0, "must be an integer from 1 to 100"),
    ("maxAttempts", 101, "must be an integer from 1 to 100"),
    ("maxAttempts", 1.5, "must be an integer from 1 to 100"),
    ("maxAttempts", True, "must be an integer from 1 to 100"),
    ("maxAttempts", "3", "must be an integer from 1 to 100"),
    ("maxAttempts", -1, "must be an integer from 1 to 100"),
    ("backoffSeconds", -1, "must be a number at least 0 and at most 86400"),
    ("backoffSeconds", -0.001, "must be a number at least 0 and at most 86400"),
    ("backoffSeconds", 86401, "must be a number at least 0 and at most 86400"),
    ("backoffSeconds", "1s", "must be a number at least 0 and at most 86400"),
    ("backoffMultiplier", 0.5, "must be a number at least 1 and at most 10"),
    ("backoffMultiplier", 0, "must be a number at least 1 and at most 10"),
    ("backoffMultiplier", 11, "must be a number at least 1 and at most 10"),
    ("jitter", 1.5, "must be a number at least 0 and at most 1"),
    ("jitter", -0.1, "must be a number at least 0 and at most 1"),
    ("jitter", False, "must be a number at least 0 and at most 1"),
])
def test_bad_retry_values(field: str, value: Any, message: str) -> None:
    assert_only(changed("task", retry={field: value}), f"$.vertices.task.retry.{field}", message)


@pytest.mark.parametrize("retry", [
    {"maxAttempts": 1}, {"maxAttempts": 100}, {"maxAttempts": 3.0}, {"backoffSeconds": 0},
    {"backoffMultiplier": 1}, {"backoffMultiplier": 10}, {"jitter": 0}, {"jitter": 1}, {},
])
def test_retry_values_at_the_bounds_are_valid(retry: dict[str, Any]) -> None:
    parse(changed("task", retry=retry))


@pytest.mark.parametrize("vertex", ["task", "http", "spawner", "chain"])
@pytest.mark.parametrize("timeout", [0, -5, 0.0, 86401, "30", True])
def test_a_timeout_that_is_not_positive(vertex: str, timeout: Any) -> None:
    assert_only(changed(vertex, timeoutSeconds=timeout), f"$.vertices.{vertex}.timeoutSeconds",
                "must be a number greater than 0 and at most 86400")


# --- TIMER ------------------------------------------------------------------------------------

def test_a_timer_with_both_seconds_and_until() -> None:
    assert_only(changed("timer", until="2030-01-01T00:00:00Z"), "$.vertices.timer",
                "a TIMER needs exactly one of 'seconds' or 'until'")


def test_a_timer_with_neither_seconds_nor_until() -> None:
    assert_only(changed("timer", seconds=...), "$.vertices.timer", "a TIMER needs exactly one of 'seconds' or 'until'")


@pytest.mark.parametrize("until", ["2030-01-01T00:00:00", "2030-01-01", "tomorrow", "", 1893456000, "now"])
def test_a_bad_until_timestamp(until: Any) -> None:
    assert_only(changed("timer", seconds=..., until=until), "$.vertices.timer.until",
                "must be an ISO-8601 timestamp with a UTC offset, or a path")


@pytest.mark.parametrize("until", ["2030-01-01T00:00:00Z", "2030-01-01T02:00:00+02:00", "$.input.due",
                                   "$.steps.task.output.due"])
def test_good_until_values(until: str) -> None:
    parse(changed("timer", seconds=..., until=until))


@pytest.mark.parametrize("seconds", [-1, "60", True, 366 * 86400 + 1])
def test_bad_timer_seconds(seconds: Any) -> None:
    assert_only(changed("timer", seconds=seconds), "$.vertices.timer.seconds",
                "must be a number at least 0 and at most 31622400")


# --- CHOICE conditions ------------------------------------------------------------------------

W = "$.vertices.choice.choices[0].when"


def test_a_condition_without_an_operator() -> None:
    assert_only(when({"path": "$.input.stop"}), W, "a condition needs exactly one operator, found 0")


def test_a_condition_with_two_operators() -> None:
    assert_only(when({"path": "$.input.stop", "equals": True, "notEquals": False}), W,
                "a condition needs exactly one operator, found 2")


def test_an_unknown_operator() -> None:
    assert errors_of(when({"path": "$.input.name", "matches": "^a"})) == [
        (f"{W}.matches", "unknown condition field 'matches'; operators are equals, notEquals, greaterThan, "
                         "greaterThanOrEquals, lessThan, lessThanOrEquals, in, exists"),
        (W, "a condition needs exactly one operator, found 0"),
    ]


def test_a_condition_without_a_path() -> None:
    assert_only(when({"equals": True}), W, "a condition needs a 'path'")


@pytest.mark.parametrize(("path", "reason"), [
    ("input.stop", "a path starts with '$'"),
    (5, "a path starts with '$'"),
    ("$.foo", "a path must start with one of $.input, $.steps"),
    ("$.item.x", "a path must start with one of $.input, $.steps"),
    ("$.steps.task", "a step path has the form $.steps.<vertex>.output…"),
    ("$.input..x", "unexpected '..x' at offset 7"),
])
def test_a_condition_with_a_bad_path(path: Any, reason: str) -> None:
    assert_only(when({"path": path, "exists": True}), f"{W}.path", f"invalid path: {reason}")


@pytest.mark.parametrize("operand", ["a", 1, {"a": 1}, None])
def test_in_takes_a_list(operand: Any) -> None:
    assert_only(when({"path": "$.input.x", "in": operand}), f"{W}.in", "'in' takes a list of values")


@pytest.mark.parametrize("operand", [1, "true", None, []])
def test_exists_takes_a_boolean(operand: Any) -> None:
    assert_only(when({"path": "$.input.x", "exists": operand}), f"{W}.exists", "'exists' takes true or false")


@pytest.mark.parametrize("operator", ["greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals"])
@pytest.mark.parametrize("operand", [[1], {"a": 1}, True, None])
def test_a_comparison_with_a_non_scalar(operator: str, operand: Any) -> None:
    assert_only(when({"path": "$.input.x", operator: operand}), f"{W}.{operator}",
                f"'{operator}' compares with a number or a string")


@pytest.mark.parametrize("combinator", ["and", "or"])
def test_a_combinator_with_extra_keys(combinator: str) -> None:
    condition = {combinator: [{"path": "$.input.x", "exists": True}], "path": "$.input.y"}
    assert_only(when(condition), W, f"'{combinator}' must be the only field of its condition")


def test_not_with_extra_keys() -> None:
    assert_only(when({"not": {"path": "$.input.x", "exists": True}, "or": []}), W,
                "'not' must be the only field of its condition")


@pytest.mark.parametrize("combinator", ["and", "or"])
@pytest.mark.parametrize("operand", [[], {"path": "$.input.x", "exists": True}, None])
def test_an_empty_or_non_list_combinator(combinator: str, operand: Any) -> None:
    assert_only(when({combinator: operand}), f"{W}.{combinator}",
                f"'{combinator}' takes a non-empty list of conditions")


@pytest.mark.parametrize("condition", [{}, None, "true", [{"path": "$.input.x", "exists": True}]])
def test_a_condition_that_is_not_a_non_empty_object(condition: Any) -> None:
    assert_reported(when(condition), W, "a condition must be a non-empty object")


def test_a_rule_without_when() -> None:
    doc = full_doc()
    del doc["vertices"]["choice"]["choices"][0]["when"]
    assert_reported(doc, W, "a condition must be a non-empty object")


def test_errors_deep_inside_a_condition_have_their_full_path() -> None:
    condition = {"and": [
        {"path": "$.input.a", "exists": True},
        {"or": [{"path": "$.input.b", "in": []}, {"not": {"path": "$.nope", "equals": 1}}]},
        {"not": {"path": "$.input.c", "lessThan": [1]}},
    ]}
    assert errors_of(when(condition)) == [
        (f"{W}.and[1].or[1].not.path", "invalid path: a path must start with one of $.input, $.steps"),
        (f"{W}.and[2].not.lessThan", "'lessThan' compares with a number or a string"),
    ]


def test_a_step_path_in_a_condition_must_read_an_earlier_vertex() -> None:
    condition = {"and": [{"path": "$.input.a", "exists": True}, {"path": "$.steps.chain.output.x", "equals": 1}]}
    assert_only(when(condition), f"{W}.and[1].path",
                "path $.steps.chain.output.x reads 'chain', which does not run before 'choice'")


# --- paths in templates -----------------------------------------------------------------------

@pytest.mark.parametrize(("vertex", "field"), [
    ("task", "input"), ("http", "body"), ("spawner", "itemInput"), ("chain", "input"), ("succeed", "output"),
])
def test_a_path_with_a_wrong_root(vertex: str, field: str) -> None:
    assert_only(changed(vertex, **{field: "$.foo"}), f"$.vertices.{vertex}.{field}",
                "invalid path '$.foo': a path must start with one of $.input, $.steps")


def test_a_bad_path_deep_in_a_template_has_its_full_path() -> None:
    doc = changed("task", input={"order": {"lines": ["$.input.a", "$.foo.b"]}, "odd key": "$.bar"})
    assert errors_of(doc) == [
        ("$.vertices.task.input.order.lines[1]", "invalid path '$.foo.b': a path must start with one of "
                                                 "$.input, $.steps"),
        ('$.vertices.task.input["odd key"]', "invalid path '$.bar': a path must start with one of $.input, $.steps"),
    ]


@pytest.mark.parametrize("text", ["$", "$[0]", "$.input..a", "$.input[x]", "$.input.a b", "$.input[-1]"])
def test_malformed_paths(text: str) -> None:
    where, message = only_error(changed("task", input=text))
    assert where == "$.vertices.task.input"
    assert message.startswith(f"invalid path {text!r}: ")


@pytest.mark.parametrize("text", ["$.item", "$.index", "$.item.id"])
@pytest.mark.parametrize(("vertex", "field"), [("task", "input"), ("succeed", "output"), ("chain", "input")])
def test_item_paths_outside_item_input(text: str, vertex: str, field: str) -> None:
    assert_only(changed(vertex, **{field: {"x": text}}), f"$.vertices.{vertex}.{field}.x",
                f"invalid path '{text}': a path must start with one of $.input, $.steps")


def test_spawner_items_cannot_be_the_item() -> None:
    assert_only(changed("spawner", items="$.item.list"), "$.vertices.spawner.items",
                "a path must start with one of $.input, $.steps")


def test_item_paths_inside_item_input_are_valid() -> None:
    parse(changed("spawner", itemInput={"item": "$.item", "id": "$.item.id", "n": "$.index", "all": "$.input",
                                        "first": "$.item[0]"}))


def test_the_index_has_no_parts() -> None:
    assert_only(changed("spawner", itemInput={"n": "$.index.x"}), "$.vertices.spawner.itemInput.n",
                "$.index is a number and has no parts")


@pytest.mark.parametrize("text", ["$.steps.task", "$.steps.task.result", "$.steps[0].output", "$.steps"])
def test_a_step_path_without_output(text: str) -> None:
    assert_only(changed("succeed", output=text), "$.vertices.succeed.output",
                "a step path has the form $.steps.<vertex>.output…")


def test_a_step_path_naming_a_missing_vertex() -> None:
    assert_only(changed("succeed", output="$.steps.ghost.output"), "$.vertices.succeed.output",
                "path $.steps.ghost.output names no vertex: 'ghost'")


@pytest.mark.parametrize(("vertex", "field", "target"), [
    ("task", "input", "task"),  # itself
    ("task", "input", "http"),  # downstream
    ("chain", "input", "fail"),  # another branch
    ("http", "body", "succeed"),
])
def test_a_step_path_naming_a_vertex_that_does_not_run_before_the_reader(vertex: str, field: str,
                                                                        target: str) -> None:
    text = f"$.steps.{target}.output.x"
    assert_only(changed(vertex, **{field: {"v": text}}), f"$.vertices.{vertex}.{field}.v",
                f"path {text} reads '{target}', which does not run before '{vertex}'")


def test_step_paths_may_read_any_upstream_vertex() -> None:
    parse(changed("chain", input={"t": "$.steps.task.output", "m": "$.steps.merge.output.items[0]",
                                  "h": "$.steps.http.output.body"}))


def test_step_paths_in_every_reading_field_are_checked() -> None:
    doc = full_doc()
    vertices = doc["vertices"]
    vertices["http"]["path"] = "/a/{$.steps.succeed.output.id}"
    vertices["spawner"]["items"] = "$.steps.chain.output.list"
    vertices["spawner"]["itemInput"] = {"x": "$.steps.timer.output"}
    vertices["timer"] = {"type": "TIMER", "until": "$.steps.fail.output.at", "next": "wait"}
    assert errors_of(doc) == [
        ("$.vertices.http.path", "path $.steps.succeed.output.id reads 'succeed', which does not run before 'http'"),
        ("$.vertices.spawner.items", "path $.steps.chain.output.list reads 'chain', which does not run before "
                                     "'spawner'"),
        ("$.vertices.spawner.itemInput.x", "path $.steps.timer.output reads 'timer', which does not run before "
                                           "'spawner'"),
        ("$.vertices.timer.until", "path $.steps.fail.output.at reads 'fail', which does not run before 'timer'"),
    ]


def test_a_bad_placeholder_in_an_http_path() -> None:
    assert_only(changed("http", path="/orders/{$.foo}/lines/{$.input.id}"), "$.vertices.http.path",
                "invalid path '$.foo': a path must start with one of $.input, $.steps")


def test_escaped_and_non_path_strings_are_not_checked() -> None:
    parse(changed("task", input={"a": "$$.foo", "b": "$5.00", "c": "price in $", "d": "$$", "e": "$foo"}))


# --- values that have no canonical JSON form ---------------------------------------------------

@pytest.mark.parametrize(("value", "message"), [
    (2**53, "number outside the exact JSON range ±(2^53 - 1)"),
    (-(2**60), "number outside the exact JSON range ±(2^53 - 1)"),
    (1e16, "number outside the exact JSON range ±(2^53 - 1)"),
    (-1e300, "number outside the exact JSON range ±(2^53 - 1)"),
    (math.nan, "must be a finite number"),
    (-math.inf, "must be a finite number"),
    ("\ud800", "text is not valid Unicode (lone surrogate)"),
])
def test_values_without_a_canonical_form_are_dsl_errors(value: Any, message: str) -> None:
    doc = changed("task", input={"n": [1, value]})
    assert errors_of(doc) == [("$.vertices.task.input.n[1]", message)]
    with pytest.raises(DslError):
        canonical(doc)
    with pytest.raises(DslError):
        content_hash(doc)


def test_a_key_that_is_not_valid_unicode() -> None:
    doc = changed("task", input={"ok": {"\udcff": 1}})
    assert errors_of(doc) == [("$.vertices.task.input.ok", "an object key is not valid Unicode (lone surrogate)")]


def test_json_text_with_such_values_is_refused_not_crashed_on() -> None:
    text = json.dumps(changed("task", input={"n": 2**53, "x": float("nan")}))
    assert errors_of(json.loads(text)) == [
        ("$.vertices.task.input.n", "number outside the exact JSON range ±(2^53 - 1)"),
        ("$.vertices.task.input.x", "must be a finite number"),
    ]


def test_the_largest_exact_integers_are_valid() -> None:
    parse(changed("task", input={"max": 2**53 - 1, "min": -(2**53 - 1), "big": 9007199254740991.0, "tiny": 1e-300}))


# --- many errors at once ----------------------------------------------------------------------

def test_several_errors_are_all_reported_in_document_order() -> None:
    doc = full_doc()
    doc["owner"] = "me"
    vertices = doc["vertices"]
    vertices["task"]["handler"] = "nodot"
    vertices["task"]["retry"] = {"maxAttempts": 0, "jitter": 2}
    vertices["http"]["method"] = "FETCH"
    vertices["spawner"]["items"] = "$.item"
    vertices["merge"]["config"] = {"tolerateChildFailures": ["DONE"]}
    vertices["timer"]["until"] = "2030-01-01T00:00:00Z"
    vertices["choice"]["choices"][0]["when"] = {"path": "$.input.x"}
    vertices["chain"]["next"] = "nowhere"
    vertices["orphan"] = {"type": "SUCCEED"}
    with pytest.raises(DslError) as info:
        parse(doc)
    error = info.value
    assert [path for path, _ in error.errors] == [
        "$.owner",
        "$.vertices.task.retry.maxAttempts",
        "$.vertices.task.retry.jitter",
        "$.vertices.task.handler",
        "$.vertices.http.method",
        "$.vertices.spawner.items",
        "$.vertices.merge.config.tolerateChildFailures[0]",
        "$.vertices.timer",
        "$.vertices.choice.choices[0].when",
        "$.vertices.chain.next",
        "$.vertices.succeed",
        "$.vertices.orphan",
    ]
    assert isinstance(error, ValueError)
    assert str(error).startswith("$.owner: unknown field 'owner'; ")
    assert error.as_list()[0] == {"path": "$.owner", "message": "unknown field 'owner'; a workflow has 'start' "
                                                                "and 'vertices'"}


def test_errors_in_every_vertex_are_reported_not_just_the_first() -> None:
    doc = full_doc()
    for vertex in doc["vertices"].values():
        vertex["bogus"] = 1
    assert [path for path, _ in errors_of(doc)] == [f"$.vertices.{vid}.bogus" for vid in full_doc()["vertices"]]


def test_canonical_and_content_hash_raise_the_same_errors() -> None:
    doc = changed("task", handler="nodot")
    expected = errors_of(doc)
    for function in (canonical, content_hash):
        with pytest.raises(DslError) as info:
            function(doc)
        assert info.value.errors == expected


def test_parse_does_not_modify_the_document() -> None:
    doc = full_doc()
    doc["vertices"]["task"]["retry"] = {"maxAttempts": 0}
    before = copy.deepcopy(doc)
    errors_of(doc)
    parse(full_doc())
    assert doc == before


# --- SPAWNER: itemsPerChild and maxConcurrency (issue 16 §3) ---------------------------------

@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, 100_001])
def test_items_per_child_is_a_bounded_integer(value: Any) -> None:
    assert_only(changed("spawner", itemsPerChild=value), "$.vertices.spawner.itemsPerChild",
                "must be an integer from 1 to 100000")


@pytest.mark.parametrize("value", [0, -3, 2.5, "10", False, 1_000_001])
def test_max_concurrency_is_a_bounded_integer(value: Any) -> None:
    assert_only(changed("spawner", maxConcurrency=value), "$.vertices.spawner.maxConcurrency",
                "must be an integer from 1 to 1000000")


def test_batched_spawner_fields_parse() -> None:
    spawner = parse(changed("spawner", itemsPerChild=50, maxConcurrency=8.0)).vertices["spawner"]
    assert (spawner.items_per_child, spawner.max_concurrency) == (50, 8)  # type: ignore[attr-defined]
    assert spawner.item_input == "$.items"  # type: ignore[attr-defined]  # a batch's default input: its items


@pytest.mark.parametrize("text", ["$.item", "$.item.id", "$.item[0]"])
def test_a_batched_child_has_no_single_item(text: str) -> None:
    assert_only(changed("spawner", itemsPerChild=10, itemInput={"x": text}), "$.vertices.spawner.itemInput.x",
                "with itemsPerChild 10 a child receives a list of items; use $.items")


def test_batch_paths_inside_item_input_are_valid() -> None:
    parse(changed("spawner", itemsPerChild=10, itemInput={"rows": "$.items", "first": "$.items[0].id",
                                                          "batch": "$.index", "from": "$.firstItem"}))
    parse(changed("spawner", itemInput={"rows": "$.items", "from": "$.firstItem"}))  # one item: a list of one


@pytest.mark.parametrize("text", ["$.items", "$.firstItem"])
def test_batch_paths_outside_item_input(text: str) -> None:
    assert_only(changed("task", input={"x": text}), "$.vertices.task.input.x",
                f"invalid path '{text}': a path must start with one of $.input, $.steps")


def test_the_first_item_position_has_no_parts() -> None:
    assert_only(changed("spawner", itemInput={"n": "$.firstItem.x"}), "$.vertices.spawner.itemInput.n",
                "$.firstItem is a number and has no parts")


def test_every_spawner_problem_is_reported_at_once() -> None:
    errors = errors_of(changed("spawner", itemsPerChild=0, maxConcurrency="x", itemInput={"a": "$.item"}))
    assert [where for where, _ in errors] == ["$.vertices.spawner.itemsPerChild", "$.vertices.spawner.maxConcurrency"]
