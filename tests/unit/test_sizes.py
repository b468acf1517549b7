"""Project rule (issue 27, in the spirit of Zulip's lint rules): small modules and classes.

A product module over ``MAX_MODULE_LINES`` lines, or a class over ``MAX_CLASS_LINES``, holds
more than one concept: split it, or list it below with a one-line reason. A listed module
that has shrunk below the limit fails too, so the list never goes stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

PRODUCT = ("executions", "workflows", "schemabridge_site")
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 250

# path (from the repository root) -> why it may be longer.
LONG_MODULES: dict[str, str] = {
    "executions/core/state.py": "the one owner of status changes (STYLE.md): every transition table and the "
                                "guarded statement that applies them, so the status-write test names one file",
    "workflows/dsl/parser.py": "the DSL's one parser: a rule per vertex kind and field, each reporting its JSON path",
    "executions/fanout/spawn.py": "the SPAWNER's batch loop and its plan (quorum, failFast, pause, edits, itemKey and "
                                  "the thread hand-over meet in one transaction per batch); to split next: its plan",
    "executions/models.py": "the app's tables as Django knows them: every column, constraint and index of the "
                            "engine in the one module Django looks in (splitting it would only scatter the schema)",
}
# "path:Class" -> why it may be longer.
LONG_CLASSES: dict[str, str] = {}


def product_modules() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py")
                  if "migrations" not in path.parts)


def class_lengths(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.name: (node.end_lineno or node.lineno) - node.lineno + 1
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_rule_measures_modules_and_classes(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("class A:\n    x = 1\n\n    def f(self):\n        pass\n\n\nclass B:\n    pass\n")
    assert class_lengths(source) == {"A": 5, "B": 2} and line_count(source) == 9
    assert len(product_modules()) > 50


def test_no_product_module_is_too_long() -> None:
    long = {str(path.relative_to(ROOT)): line_count(path) for path in product_modules()
            if line_count(path) > MAX_MODULE_LINES}
    assert {name: lines for name, lines in long.items() if name not in LONG_MODULES} == {}
    assert [name for name in LONG_MODULES if name not in long] == [], "listed but no longer long: unlist it"


def test_no_product_class_is_too_long() -> None:
    long = {f"{path.relative_to(ROOT)}:{name}": lines for path in product_modules()
            for name, lines in class_lengths(path).items() if lines > MAX_CLASS_LINES}
    assert {name: lines for name, lines in long.items() if name not in LONG_CLASSES} == {}
    assert [name for name in LONG_CLASSES if name not in long] == [], "listed but no longer long: unlist it"
