"""Project rule (issue 13): no import cycle between the project's modules.

Every ``import`` counts, including those inside functions: an import deferred to dodge a
cycle is still a cycle for a reader. The graph is built from the source (no imports run),
so the test also catches cycles in modules that are never imported by the suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemabridge_site", "workflows", "executions", "demo", "bench")


def project_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py") if (ROOT / package).is_dir() else []:
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(path, module):
            # ``from a.b import c``: an edge to a.b.c if it is a module, else to a.b.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(f"{name}."):
                targets.add(name)
        edges[module] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_count(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from executions import engine\n    import workflows.dsl\n")
    assert {"executions", "executions.engine", "workflows.dsl"} <= imported_names(source, "executions.m")


def test_no_import_cycle_between_project_modules() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_workflows_never_imports_executions() -> None:
    """The dependency direction between the apps: executions builds on workflows."""
    offenders = {module: sorted(t for t in targets if t.split(".")[0] == "executions")
                 for module, targets in graph().items() if module.split(".")[0] == "workflows"}
    assert not {m: t for m, t in offenders.items() if t}
