"""Project rule: what tests share lives once, in ``tests/support``.

A test module (or conftest) that defines, at module level, a function or class with the name
of a ``tests/support`` helper is a copy of it (or a confusing namesake), and a test module that
imports from another test module or from a conftest hides a shared helper outside the support
package. Fixtures are exempt: pytest scopes them by directory, so a namesake is deliberate.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"


def is_fixture(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any("fixture" in ast.unparse(decorator) for decorator in decorators)


def definitions(path: Path) -> dict[str, int]:
    """Module-level functions and classes (not fixtures) of ``path``: name → line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.name: node.lineno for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not is_fixture(node)}


def imported_test_modules(path: Path) -> list[str]:
    """The test modules and conftests that ``path`` imports from."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        found += [name for name in names if name.startswith("tests.") and not name.startswith("tests.support")
                  and (name.rsplit(".", 1)[-1].startswith("test_") or name.endswith("conftest"))]
    return found


def support_helpers() -> dict[str, str]:
    """Public helper names of ``tests/support``: name → the module that owns it."""
    return {name: path.stem for path in sorted(SUPPORT.glob("*.py"))
            for name in definitions(path) if not name.startswith("_")}


def suite_modules() -> list[Path]:
    return [path for path in sorted(TESTS.rglob("*.py")) if SUPPORT not in path.parents]


def test_the_support_package_is_found() -> None:
    helpers = support_helpers()
    assert {"run_engine", "client_for", "make_actor", "Cluster"} <= set(helpers), sorted(helpers)
    assert len(suite_modules()) > 20


def test_the_check_sees_a_copied_helper_and_a_cross_module_import(tmp_path: Path) -> None:
    copied = tmp_path / "test_copy.py"
    copied.write_text("import pytest\nfrom tests.integration.test_engine import x\n\n"
                      "def run_engine():\n    pass\n\n@pytest.fixture\ndef workspace():\n    pass\n")
    assert set(definitions(copied)) & set(support_helpers()) == {"run_engine"}
    assert imported_test_modules(copied) == ["tests.integration.test_engine"]


def test_no_test_module_redefines_a_support_helper() -> None:
    helpers = support_helpers()
    copies = [f"{path.relative_to(ROOT)}:{line} defines {name} (use tests.support.{helpers[name]}.{name})"
              for path in suite_modules() for name, line in definitions(path).items() if name in helpers]
    assert copies == []


def test_no_test_module_imports_from_another_test_module_or_a_conftest() -> None:
    imports = [f"{path.relative_to(ROOT)} imports {module} (move what it shares to tests/support)"
               for path in suite_modules() for module in imported_test_modules(path)]
    assert imports == []
