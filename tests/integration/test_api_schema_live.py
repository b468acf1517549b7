"""The schema is the contract, checked from outside: schemathesis' command line (an
independent fuzzer driven by ``/api/schema/``) runs every check it has — a schema-valid
request must be accepted, a schema-invalid one refused, every response must match — against
a live server (pytest-django's ``live_server``, over HTTP), and finds nothing.

Path parameters come from real objects (``real_objects``, schemathesis dictionaries) 80% of
the time, so the fuzzer reaches the operations' logic rather than their 404s; the rest of the
time it invents them. One example per operation and phase, a fixed seed, two workers: about
45 s on an idle two-core machine (the coverage phase, which tries each field's boundaries and
each way to break it, is most of it).

Excluded, each for a reason a schema cannot state (docs/api.md, "The schema"):

- ``publish_version`` from ``positive_data_acceptance``: the schema gives a workflow
  document's outline (fields, vertex types), not what makes it valid — each vertex type's
  fields, JSON paths, that every ``next`` names a vertex, the graph's shape (docs/dsl.md).
- ``create_upload`` from ``positive_data_acceptance``: its body is a file (``format:
  binary``); that its bytes are well-formed JSON Lines, or CSV with a header row, is not a
  schema. (Its invalid requests — no body, another media type — are refused: checked.)
- ``create_destination`` and ``update_destination`` from ``positive_data_acceptance``: in
  adaptive mode ``concurrency_min`` may not exceed ``concurrency_limit`` — on a PATCH, the
  stored one when the body leaves it out — and JSON Schema cannot compare two values (every
  other check still runs on them; tests/integration/test_api_destinations.py covers what they
  accept).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from executions.destinations import rules
from executions.models import Execution
from executions.services import schedules, uploads
from tests.support import helpers
from workflows.access import create_token

pytestmark = pytest.mark.django_db(transaction=True)

ST = Path(sys.executable).with_name("st")
ROOT = Path(__file__).resolve().parents[2]
EXCLUDED = {"positive_data_acceptance": ["publish_version", "create_upload", "create_destination",
                                          "update_destination"]}


# Operations that change an execution tree, each given a tree of its own: run side by side
# (two workers) on one tree, a cancel and a retry can deadlock (reported; not this test's subject).
WRITES = ("retry_execution", "retry_step", "retry_failed_children", "cancel_execution", "cancel_open_children")


def fan_out(workspace: Any) -> list[str]:
    """A finished fan-out with failed children: the parent's id and a failed child's."""
    parent = helpers.start(workspace, "parent", {"items": [{"i": i, "fail": i % 2 == 1} for i in range(4)]})
    helpers.run_engine()
    child = Execution.objects.filter(parent=parent, status="FAILED").order_by("item_index").first()
    assert child is not None
    return [str(parent.pk), str(child.pk)]


def real_objects(workspace: Any) -> dict[str, list[str]]:
    """Fan-outs with failed children, a destination, a schedule, an upload: the values of each
    kind of path parameter, as real objects of this workspace."""
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    version = helpers.publish(workspace, "parent", helpers.fanout_doc())
    rules.create_destination(workspace, name="ledger", base_url="https://ledger.example")
    schedules.create_schedule(workspace, name="nightly", workflow="parent", cron="0 2 * * *")
    body = iter([b'{"id": 1}\n', b""])
    upload = uploads.receive(workspace.pk, lambda size: next(body), format="jsonl", created_by="test")
    return {"executions": fan_out(workspace), **{operation: fan_out(workspace) for operation in WRITES},
            "vertices": ["fan", "join", "t"], "workflows": ["parent", "child"], "versions": [version.hash],
            "destinations": ["ledger"], "schedules": ["nightly"], "uploads": [str(upload.id)]}


# Which dictionary of real values each path parameter draws from, by path or operation.
BINDINGS = (*((f'include-operation-id = "{operation}"', "id", operation) for operation in WRITES),
            ('include-path-regex = "^/api/v1/executions/"', "id", "executions"),
            ('include-path-regex = "^/api/v1/uploads/"', "id", "uploads"),
            ('include-path-regex = "^/api/v1/destinations/"', "name", "destinations"),
            ('include-path-regex = "^/api/v1/schedules/"', "name", "schedules"),
            ('include-path-regex = "^/api/v1/workflows/"', "key", "workflows"),
            ('include-path-regex = "^/api/v1/versions/"', "hash", "versions"),
            ('include-path-regex = "/steps/"', "vertex", "vertices"))


def config(values: dict[str, list[str]]) -> str:
    """schemathesis.toml: a dictionary per kind of object, bound to the path parameters
    (real 80% of the time), and the exclusions. Every check is on unless excluded here."""
    lines = []
    for name, entries in values.items():
        lines += [f"[dictionaries.{name}]", "values = [" + ", ".join(f'"{entry}"' for entry in entries) + "]"]
    for selector, parameter, dictionary in BINDINGS:
        lines += ["[[operations]]", selector,
                  f'parameters = {{ "path.{parameter}" = {{ dictionary = "{dictionary}", probability = 0.8 }} }}']
    for check, operations in EXCLUDED.items():
        for operation in operations:
            lines += ["[[operations]]", f'include-operation-id = "{operation}"', f"checks.{check}.enabled = false"]
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(300)  # ~45 s on an idle 2-core machine; room for a loaded one
def test_a_live_server_meets_its_schema_under_every_check(live_server: Any, workspace: Any, tmp_path: Path) -> None:
    token = create_token(workspace, name="schemathesis", role="admin")[1]
    toml = tmp_path / "schemathesis.toml"
    toml.write_text(config(real_objects(workspace)))
    command = [str(ST), "--config-file", str(toml), "--no-color", "run", f"{live_server.url}/api/schema/?format=json",
               "--max-examples", "1", "--seed", "1", "--generation-database", "none",
               "--header", f"Authorization: Token {token}", "--workers", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, cwd=tmp_path,  # its cache goes there
                          env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT),
                               "SCHEMATHESIS_HOOKS": "tests.support.schemathesis_hooks"}, check=False)
    print(done.stdout[-4000:])  # the run summary (shown with -s, and with a failure)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
