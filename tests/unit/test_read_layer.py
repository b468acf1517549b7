"""Project rule (STYLE.md): views parse input, call a selector or a service, and render.
The API's and the UI's modules build no queries: no ``Model.objects``, no cursor, no raw
SQL. Their reads live in the selectors layer (executions/selectors/, workflows/selectors.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = [ROOT / "executions" / "api", ROOT / "executions" / "ui"]
QUERY_CALLS = {"raw", "execute", "executemany", "extra"}
QUERY_IMPORTS = {"connection", "connections", "RawSQL"}


def query_building(source: str) -> list[str]:
    """What in ``source`` reads the database directly, as 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(f"{node.lineno}: .objects")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in QUERY_CALLS:
            found.append(f"{node.lineno}: .{node.func.attr}()")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django.db"):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in QUERY_IMPORTS]
    return sorted(found, key=lambda entry: int(entry.split(":")[0]))


def test_the_checker_flags_each_kind_of_query():
    source = ("from django.db import connection\nfrom django.db.models.expressions import RawSQL\n"
              "Step.objects.filter(id=1)\ncursor.execute('SELECT 1')\nExecution.objects.raw('SELECT 1')\n")
    assert query_building(source) == ["1: import connection", "2: import RawSQL", "3: .objects",
                                      "4: .execute()", "5: .raw()", "5: .objects"]


def test_api_and_ui_modules_build_no_queries():
    assert all(folder.is_dir() for folder in WEB), "the web layer moved: point WEB at it"
    offenders = {str(path.relative_to(ROOT)): found for folder in WEB for path in sorted(folder.rglob("*.py"))
                 if (found := query_building(path.read_text()))}
    assert offenders == {}
