"""Reading query plans: EXPLAIN a statement, list its scans (the plan tests)."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection


def plan(sql: str, params: dict[str, Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        row = cursor.fetchone()[0]
    return row if isinstance(row, list | dict) else json.loads(row)


def scans(node: dict | list) -> list[tuple[str, str | None, str | None]]:
    """Every scan node of a plan: (node type, relation, index)."""
    if isinstance(node, list):
        return [s for n in node for s in scans(n)]
    found = []
    if "Plan" in node:
        return scans(node["Plan"])
    if "Relation Name" in node:
        found.append((node["Node Type"], node.get("Relation Name"), node.get("Index Name")))
    for child in node.get("Plans", []):
        found.extend(scans(child))
    return found


def indexes(node: dict | list) -> set[str]:
    """Every index a plan reads (bitmap index scans name no relation, so ``scans`` skips them)."""
    if isinstance(node, list):
        return {name for n in node for name in indexes(n)}
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in ([node["Plan"]] if "Plan" in node else []) + node.get("Plans", []):
        found |= indexes(child)
    return found
