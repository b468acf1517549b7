"""Project rule (STYLE.md): Execution and Step statuses are written only by executions/core/state.py.

The check reads every source module and flags SQL whose SET clause or INSERT column list
names ``status``, ORM ``.update(status=…)``/``create(status=…)``, and ``.status = …``
assignments. Rows are inserted without a status: the database default gives the first one.
"""

from __future__ import annotations

import re

from tests.support import ROOT

ALLOWED = {ROOT / "executions" / "core" / "state.py"}
PACKAGES = ["executions", "workflows", "schemabridge_site"]

SQL_UPDATE_SET = re.compile(r"UPDATE\s+\w+(?:\s+\w+)?\s+SET\s+(?P<set>.*?)(?:\bFROM\b|\bWHERE\b|\bRETURNING\b|$)",
                            re.IGNORECASE | re.DOTALL)
SQL_INSERT_COLUMNS = re.compile(r"INSERT\s+INTO\s+(?P<table>\w+)\s*\((?P<cols>[^)]*)\)", re.IGNORECASE)
ORM_WRITES = [
    re.compile(r"\.update\([^)]*\bstatus\s*="),
    re.compile(r"\.(?:create|get_or_create|update_or_create|bulk_create)\([^)]*\bstatus\s*="),
    re.compile(r"^\s*[A-Za-z_][\w.]*\.status\s*=(?!=)", re.MULTILINE),
    re.compile(r"update_fields\s*=\s*\[[^\]]*[\"']status[\"']"),
]
STATUS_TABLES = ("executions_execution", "executions_step")


def violations(source: str) -> list[str]:
    found = []
    for match in SQL_UPDATE_SET.finditer(source):
        if re.search(r"\bstatus\s*=", match.group("set"), re.IGNORECASE):
            found.append(match.group(0)[:80])
    for match in SQL_INSERT_COLUMNS.finditer(source):
        if match.group("table") in STATUS_TABLES and re.search(r"\bstatus\b", match.group("cols")):
            found.append(match.group(0)[:80])
    for pattern in ORM_WRITES:
        found += [m.group(0) for m in pattern.finditer(source)]
    return found


def test_the_checker_catches_each_kind_of_status_write() -> None:
    assert violations("cursor.execute('UPDATE executions_step SET status = %s WHERE id = 1')")
    assert violations("UPDATE executions_execution e SET error = '', status = 'FAILED' FROM x")
    assert violations("INSERT INTO executions_step (execution_id, status) VALUES (1, 'READY')")
    assert violations("Step.objects.filter(pk=1).update(status='FAILED')")
    assert violations("Execution.objects.create(status='RUNNING')")
    assert violations("step.status = 'FAILED'\nstep.save()")
    assert violations("step.save(update_fields=['status'])")
    assert not violations("SELECT id FROM executions_step WHERE status = 'READY'")
    assert not violations("UPDATE executions_step SET lease_expires_at = now() WHERE status = 'RUNNING'")
    assert not violations("if step.status == 'FAILED':")
    assert not violations("SELECT 1 FROM executions_step s WHERE s.status = 'RUNNING'")


def test_status_is_written_only_by_the_state_module() -> None:
    offenders = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path in ALLOWED or "migrations" in path.parts:
                continue
            found = violations(path.read_text())
            if found:
                offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}, f"status written outside executions/core/state.py: {offenders}"
