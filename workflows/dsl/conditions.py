"""CHOICE conditions: a small, total boolean language over context paths.

A condition is one of
    {"path": "$…", "<operator>": value}   with exactly one operator
    {"and": [condition, …]}  {"or": [condition, …]}  {"not": condition}

Operators: equals, notEquals (any JSON value); greaterThan, greaterThanOrEquals, lessThan,
lessThanOrEquals (a number or a string, compared only with a value of the same kind); in (a
list of values); exists (true/false). A path with no value makes every operator false except
``exists: false`` and ``notEquals``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflows.dsl.paths import PathNotFound, PathSyntaxError, check_path, json_key, resolve

COMPARISONS = ("greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals")
OPERATORS = ("equals", "notEquals", *COMPARISONS, "in", "exists")
COMBINATORS = ("and", "or", "not")

Report = Callable[[str, str], None]


def check(condition: Any, where: str, report: Report) -> list[tuple[str, str]]:
    """Validate a condition, reporting problems; returns ``(json_path, path_text)`` for
    every path it reads."""
    if not isinstance(condition, dict) or not condition:
        report(where, "a condition must be a non-empty object")
        return []
    combinators = [key for key in condition if key in COMBINATORS]
    if combinators:
        return _check_combinator(condition, combinators, where, report)
    return _check_leaf(condition, where, report)


def _check_combinator(condition: dict[str, Any], keys: list[str], where: str,
                      report: Report) -> list[tuple[str, str]]:
    if len(condition) != 1:
        report(where, f"'{keys[0]}' must be the only field of its condition")
        return []
    key = keys[0]
    operand = condition[key]
    if key == "not":
        return check(operand, f"{where}.not", report)
    if not isinstance(operand, list) or not operand:
        report(f"{where}.{key}", f"'{key}' takes a non-empty list of conditions")
        return []
    paths: list[tuple[str, str]] = []
    for index, item in enumerate(operand):
        paths += check(item, f"{where}.{key}[{index}]", report)
    return paths


def _check_leaf(condition: dict[str, Any], where: str, report: Report) -> list[tuple[str, str]]:
    unknown = [key for key in condition if key != "path" and key not in OPERATORS]
    for key in unknown:
        report(f"{where}{json_key(str(key))}", f"unknown condition field '{key}'; operators are {', '.join(OPERATORS)}")
    operators = [key for key in condition if key in OPERATORS]
    if len(operators) != 1:
        report(where, f"a condition needs exactly one operator, found {len(operators)}")
    paths = []
    if "path" not in condition:
        report(where, "a condition needs a 'path'")
    else:
        try:
            check_path(condition["path"])
            paths.append((f"{where}.path", condition["path"]))
        except PathSyntaxError as error:
            report(f"{where}.path", f"invalid path: {error}")
    for operator in operators:
        _check_operand(operator, condition[operator], f"{where}.{operator}", report)
    return paths


def _check_operand(operator: str, value: Any, where: str, report: Report) -> None:
    if operator in COMPARISONS and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
        report(where, f"'{operator}' compares with a number or a string")
    elif operator == "in" and not isinstance(value, list):
        report(where, "'in' takes a list of values")
    elif operator == "exists" and not isinstance(value, bool):
        report(where, "'exists' takes true or false")


def evaluate(condition: dict[str, Any], context: dict[str, Any]) -> bool:
    """Evaluate a validated condition against an execution context."""
    if "and" in condition:
        return all(evaluate(item, context) for item in condition["and"])
    if "or" in condition:
        return any(evaluate(item, context) for item in condition["or"])
    if "not" in condition:
        return not evaluate(condition["not"], context)
    operator = next(key for key in condition if key != "path")
    operand = condition[operator]
    try:
        value = resolve(condition["path"], context)
    except PathNotFound:
        return (operator == "exists" and operand is False) or operator == "notEquals"
    return _apply(operator, value, operand)


def _apply(operator: str, value: Any, operand: Any) -> bool:
    if operator == "exists":
        return operand is True
    if operator == "equals":
        return _same(value, operand)
    if operator == "notEquals":
        return not _same(value, operand)
    if operator == "in":
        return any(_same(value, item) for item in operand)
    if not _comparable(value, operand):
        return False
    if operator == "greaterThan":
        return bool(value > operand)
    if operator == "greaterThanOrEquals":
        return bool(value >= operand)
    if operator == "lessThan":
        return bool(value < operand)
    return bool(value <= operand)


def _same(left: Any, right: Any) -> bool:
    # JSON semantics at every depth: true is not 1, and 1 equals 1.0.
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(value, right[key]) for key, value in left.items())
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def _comparable(left: Any, right: Any) -> bool:
    numbers = (int, float)
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    if isinstance(left, numbers) and isinstance(right, numbers):
        return True
    return isinstance(left, str) and isinstance(right, str)
