"""Project rules (issues 13 and 27): the layers of docs/architecture.md, and no import cycle.

``LAYERS`` is the layer map, lowest first: a module may import modules of its own layer and
of the layers below it, never above (``ALLOWED_UP`` lists each exception with its reason).
Every project module must belong to a layer, so a new module is placed on purpose. No two
modules and no two packages import each other, directly or round a longer cycle.

Every ``import`` counts, including those inside functions: an import deferred to dodge a
cycle is still a cycle for a reader. The graph is built from the source (no imports run),
so the test also catches edges in modules that are never imported by the suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemabridge_site", "workflows", "executions", "demo", "bench")

# The layer map, lowest first: (layer, the modules and packages it holds). A module belongs
# to the layer of the longest name that is it or a package above it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("domain", ("workflows", "workflows.dsl", "workflows.errors", "workflows.fields", "workflows.models",
                "workflows.handlers", "workflows.handler_modules", "workflows.sudo", "workflows.signing")),
    ("platform", ("executions.platform",)),
    ("core", ("executions.models", "executions.wait_models", "executions.flow_models", "executions.bulk_models",
              "executions.control_models", "executions.handlers", "executions.core")),
    ("destinations", ("executions.destinations",)),
    ("fanout", ("executions.fanout",)),
    ("engine", ("executions.engine",)),
    ("read", ("executions.selectors", "workflows.selectors")),
    ("services", ("executions.services", "workflows.services", "workflows.access", "workflows.audit",
                  "workflows.claims", "workflows.actors", "workflows.logins", "workflows.throttle")),
    ("worker", ("executions.worker", "executions.kick", "executions.registry")),
    ("web", ("executions.api", "executions.ui", "executions.admin", "executions.extensions",
             "executions.management", "workflows.admin", "workflows.queue_admin", "workflows.management")),
    ("site", ("schemabridge_site", "executions", "executions.apps", "workflows.apps", "workflows.checks")),
    ("optional apps", ("demo", "bench")),
]

# (importer, imported) edges that run up the layers on purpose, each with its reason.
ALLOWED_UP: dict[tuple[str, str], str] = {}


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


def layer_of(module: str) -> int | None:
    """The rank of ``module``'s layer in LAYERS (None: in no layer)."""
    best: tuple[int, int] | None = None
    for rank, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.")) and (best is None or len(name) > best[0]):
                best = (len(name), rank)
    return None if best is None else best[1]


def upward_edges(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            low, high = layer_of(module), layer_of(target)
            if low is not None and high is not None and high > low and (module, target) not in ALLOWED_UP:
                found.append(f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})")
    return found


def package_of(module: str) -> str:
    """The package a module counts for in the package graph: a sub-package of an app
    (``executions.core``, ``workflows.dsl``), else the module itself."""
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = package_of(module)
        packages.setdefault(source, set()).update(package_of(t) for t in targets if package_of(t) != source)
    return packages


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("executions.core.state") < layer_of("executions.engine.runner") < layer_of("executions.api.urls")
    assert layer_of("elsewhere.module") is None and layer_of("executions.models") == layer_of("executions.core")
    assert layer_of("executions.coreish") == layer_of("executions")  # a name prefix is not a package
    found = upward_edges({"executions.core.state": {"executions.engine.runner", "executions.platform.metrics"}})
    assert found == ["executions.core.state (core) imports executions.engine.runner (engine)"]


def test_every_module_is_in_a_layer() -> None:
    assert [module for module in sorted(project_modules()) if layer_of(module) is None] == []


def test_no_import_runs_up_the_layers() -> None:
    found = upward_edges(graph())
    assert not found, "imports that run up the layers (docs/architecture.md, Layer map):\n" + "\n".join(found)


def test_every_allowed_upward_import_still_exists() -> None:
    edges = graph()
    assert [edge for edge in ALLOWED_UP if edge[1] not in edges.get(edge[0], set())] == []


def test_no_import_cycle_between_packages() -> None:
    found = cycles(package_graph(graph()))
    assert not found, "package cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_apps_import_each_other_one_way() -> None:
    """workflows < executions < schemabridge_site: the site assembles the apps, never the reverse."""
    tops = {}
    for module, targets in graph().items():
        tops.setdefault(module.split(".")[0], set()).update(t.split(".")[0] for t in targets)
    assert "executions" not in tops["workflows"] and "schemabridge_site" not in tops["executions"] | tops["workflows"]
