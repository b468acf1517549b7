"""Project rule (issue 13, STYLE.md): "who writes this table" has one answer.

Every raw SQL write (INSERT INTO / UPDATE / DELETE FROM) of a table lives in the module
that owns the table's aggregate; any other module calls that module. Status changes of
executions and steps (state.py's guarded statement, whose table is a parameter) are
checked by test_status_writes.py.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("executions", "workflows", "schemabridge_site")

# table -> the modules that may write it, and why.
OWNERS: dict[str, set[str]] = {
    "executions_execution": {"executions/core/records.py",  # inserts; status: state.py
                             "executions/core/priorities.py",  # a tree's priority (issue 30)
                             "executions/core/retention.py"},  # retention marks and position; purge (S19)
    "executions_step": {"executions/core/records.py",  # inserts; status: state.py
                        "executions/core/priorities.py",  # a tree's priority, copied to its open steps
                        "executions/core/leases.py",  # lease renewal (the fence)
                        "executions/core/waits.py",  # a waiting step's heartbeat moves its due time
                        "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_event": {"executions/core/state.py",  # appended with each transition, and notes
                         "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_fanout": {"executions/fanout/spawn.py",  # plan and spawn cursor
                          "executions/fanout/edits.py",  # an operator's live edit (issue 31)
                          "executions/core/state.py",  # child counters, moved with each child's transition
                          "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_payload": {"executions/core/payloads.py",
                           "executions/core/retention.py"},  # payload retention and purge (S19)
    "executions_wait": {"executions/core/waits.py"},  # waits for the outside world (S27): register, complete
    "executions_externalevent": {"executions/core/waits.py"},  # events posted to a workspace, their retention
    "executions_bulkoperation": {"executions/core/bulk.py"},  # bulk operations (issue 31 §5): create, lease, counters
    "executions_bulkitem": {"executions/core/bulk.py"},  # their outcome ledger
    "executions_upload": {"executions/services/uploads.py"},
    "executions_uploaditem": {"executions/services/uploads.py"},
    "executions_fanoutitem": {"executions/fanout/spawn.py",  # a spawner's items: exploded at plan, dropped per batch
                              "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_quotausage": {"executions/core/quotas.py"},
    "executions_pause": {"executions/core/pauses.py",  # pauses of trees and workspaces (issue 31)
                         "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_fanoutedit": {"executions/fanout/edits.py",  # the history of live edits (issue 31)
                              "executions/core/retention.py"},  # purge of whole finished trees (S19)
    "executions_drainkick": {"executions/kick.py"},
    "executions_fairshare": {"executions/core/fairness.py"},  # the fair claim's credits and cursors
    "executions_fairclock": {"executions/core/fairness.py"},
    "executions_workerprocess": {"executions/registry.py"},  # registrations, heartbeats, expiry
    "executions_destination": {"executions/core/leases.py",  # the rate-limit token bucket, spent by claims
                               "executions/core/flow.py"},  # flow control's state: cooldown, current limit, breaker
    "executions_destinationcall": {"executions/core/calls.py"},
    # The charts' flow history: limit rows come from a trigger (migration 0025), purged here;
    # samples are written by the drains' housekeeping through this module.
    "executions_destinationlimit": {"executions/core/flow_history.py"},
    "executions_destinationsample": {"executions/core/flow_history.py"},
    "executions_schedule": {"executions/services/schedules.py"},  # a fire advances next_run_at
    "workflows_workflowdefinition": {"workflows/services.py"},
    "workflows_workflowversion": {"workflows/services.py"},
    "workflows_claimnonce": {"workflows/claims.py"},
    "workflows_throttlecounter": {"workflows/throttle.py"},
}

WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+((?:executions|workflows)_[a-z_]+)", re.IGNORECASE)


def writes(source: str) -> set[str]:
    return {match.group(1).lower() for match in WRITE.finditer(source)}


def test_the_checker_sees_each_kind_of_write() -> None:
    assert writes("INSERT INTO executions_payload (a) VALUES (1)") == {"executions_payload"}
    assert writes("UPDATE executions_fanout f SET x = 1") == {"executions_fanout"}
    assert writes("delete from workflows_claimnonce where 1") == {"workflows_claimnonce"}
    assert writes("SELECT * FROM executions_step") == set()


def test_every_table_is_written_by_its_owner_only() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            module = str(path.relative_to(ROOT))
            for table in writes(path.read_text()):
                if module not in OWNERS.get(table, set()):
                    offenders.append(f"{module} writes {table}")
    assert not offenders, "\n".join(offenders)
