"""Every vertex kind of the DSL has exactly one module in executions/vertices, and each
module has the shape the engine calls (``needs`` and ``run``)."""

from __future__ import annotations

import inspect

from executions.engine import vertices
from workflows.dsl import ast


def dsl_kinds() -> set[str]:
    def subclasses(cls: type) -> set[type]:
        found = set(cls.__subclasses__())
        for sub in list(found):
            found |= subclasses(sub)
        return found

    return {cls.type for cls in subclasses(ast.Vertex) if cls.type}


def test_each_dsl_kind_has_one_module() -> None:
    assert set(vertices.KINDS) == dsl_kinds()
    assert len({module.__name__ for module in vertices.KINDS.values()}) == len(vertices.KINDS)


def test_each_module_exposes_needs_and_run() -> None:
    for kind, module in vertices.KINDS.items():
        assert list(inspect.signature(module.needs).parameters) == ["vertex"], kind
        assert list(inspect.signature(module.run).parameters) == ["step"], kind


def test_the_engine_core_never_branches_on_a_kind() -> None:
    """The core (claim, lease, run, commit) names no vertex kind: that is the vertex modules' job."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "executions"
    kinds = dsl_kinds()
    classes = {cls for cls in dir(ast) if isinstance(getattr(ast, cls), type)
               and issubclass(getattr(ast, cls), ast.Vertex) and getattr(ast, cls).type}
    core = [root / name for name in ("engine/runner.py", "core/leases.py", "core/state.py", "core/runs.py",
                                     "core/records.py")]
    for path in [*core, *sorted((root / "worker").glob("*.py"))]:
        source, name = path.read_text(), path.name
        assert not [k for k in kinds if f'"{k}"' in source or f"'{k}'" in source], name
        assert not [c for c in classes if f"ast.{c}" in source], name
