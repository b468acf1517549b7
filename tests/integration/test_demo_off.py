"""Production settings (``SB_DEMO`` unset) load no demo, fault injection or benchmark code
(issue 13 item 1, issue 15 item 7): ``demo.*`` handlers are unknown (publishing one is a 400
at its JSON path, and a worker fails such a step instead of running it), ``/demo/`` is a 404,
nothing writes the demo tables, and ``bench``/``chaos`` are not commands.

The suite itself runs with ``SB_DEMO=1`` (test_settings), so the checks run in a subprocess
with production settings on the test database; the probe rolls back everything it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

# The probe needs the test database to exist (it never sees these tests' transactions).
pytestmark = pytest.mark.django_db

# Runs under production settings. Requests are made as https to an allowed host, so that
# production's host and TLS settings never stand between the request and the URL resolver.
PROBE = r"""
import json
import uuid

import django

django.setup()

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import get_commands
from django.db import connection, transaction
from django.test import Client
from rest_framework.test import APIClient

import executions.worker.tasks  # everything a worker process loads
from executions.services import lifecycle as services
from executions.handlers import registry
from executions.models import Destination, Execution, Step
from tests.support import factories, helpers
from workflows.access import create_token
from workflows.models import Membership, Plan, Role, Workspace

HOST = {"HTTP_HOST": "localhost"}
CRASH = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.crash_if", "input": {"crash": True}}}}


def rows(table):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


result = {
    "apps": sorted(config.label for config in apps.get_app_configs()),
    "demo_handlers": sorted(name for name in registry if name.startswith("demo.")),
    "commands": sorted(set(get_commands()) & {"bench", "bench_ui", "chaos", "sb_up", "qcluster"}),
}
with transaction.atomic():
    tag = uuid.uuid4().hex[:12]
    plan = Plan.objects.create(name=f"demo-off-{tag}", executions_per_day=100)
    workspace = Workspace.objects.create(slug=f"demo-off-{tag}", name="demo off", plan=plan)
    _, secret = create_token(workspace, name="author", role=Role.AUTHOR)
    api = APIClient(**HOST)
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    published = api.post("/api/v1/workflows/crash/versions", CRASH, format="json", secure=True)
    result["publish"] = {"status": published.status_code, "body": published.json()}

    # A version published while a deployment still had the handler: this worker fails the
    # step (its process lives on to print the result) instead of running it.
    installed = registry.get("demo.crash_if")
    registry["demo.crash_if"] = lambda data, context: None
    try:
        helpers.publish(workspace, "old-crash", CRASH)
    finally:
        registry.pop("demo.crash_if")
        if installed is not None:
            registry["demo.crash_if"] = installed
    execution = services.start_execution(workspace, workflow="old-crash", input={}, created_by="probe").execution
    helpers.run_engine()
    step = Step.objects.get(execution=execution, vertex="t")
    result["old_step"] = {"status": step.status, "error": step.error,
                          "execution": Execution.objects.get(pk=execution.pk).status}

    tables = {table: rows(table) for table in ("executions_demoledgerentry", "executions_demoswitch")}
    entry = Client(**HOST).post("/demo/ledger/entries", json.dumps({"id": "entry-00001"}),
                                content_type="application/json", secure=True)
    Destination.objects.create(workspace=workspace, name="demo-ledger", base_url="http://127.0.0.1:9/demo/ledger")
    user = get_user_model().objects.create_user(f"demo-off-{tag}", password=uuid.uuid4().hex)
    Membership.objects.create(user=user, workspace=workspace, role=Role.OPERATOR)
    browser = Client(**HOST)
    browser.force_login(user)
    switch = browser.post("/demo/ledger-health", {"on": "1"}, secure=True)
    page = browser.get("/rate-limits/", secure=True)
    result["ledger_entries"] = entry.status_code
    result["ledger_switch"] = switch.status_code
    result["rate_limits"] = {"status": page.status_code, "demo_switch": 'id="demo-switch"' in page.content.decode()}
    result["demo_tables_unchanged"] = tables == {table: rows(table) for table in tables}
    transaction.set_rollback(True)
print("PROBE " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def production_env(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> dict[str, str]:
    """This environment with production settings on the test database and SB_DEMO unset."""
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    assert database.startswith("test_"), database
    env = {key: value for key, value in os.environ.items() if key not in {"SB_DEMO", "DEBUG"}}
    # Its own STATIC_ROOT: the suite's other tests (another xdist worker) read the project's meanwhile.
    env.update(DJANGO_SETTINGS_MODULE="schemabridge_site.settings", SB_DB_NAME=database,
               SB_STATIC_ROOT=str(tmp_path_factory.mktemp("static_collected")))
    # Production serves hashed static files from STATIC_ROOT (WhiteNoise's manifest), as
    # `make run` prepares them: pages render only after collectstatic.
    collected = subprocess.run([sys.executable, str(ROOT / "manage.py"), "collectstatic", "--noinput", "-v", "0"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stderr[-3000:]
    return env


@pytest.fixture(scope="module")
def probe(production_env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=production_env, capture_output=True,
                          text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert done.returncode == 0 and lines, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("PROBE "))
    return result


def test_production_installs_neither_the_demo_nor_the_benchmarks(probe: dict[str, Any]) -> None:
    assert "executions" in probe["apps"] and "workflows" in probe["apps"]
    assert "demo" not in probe["apps"] and "bench" not in probe["apps"]
    assert probe["demo_handlers"] == []


def test_publishing_a_task_naming_the_worker_killing_handler_is_refused_at_its_path(probe: dict[str, Any]) -> None:
    assert probe["publish"]["status"] == 400
    assert probe["publish"]["body"]["code"] == "invalid-workflow"
    assert probe["publish"]["body"]["errors"] == [
        {"path": "$.vertices.t.handler", "message": "no TASK handler is registered as 'demo.crash_if'"}]


def test_no_worker_runs_a_demo_handler_published_elsewhere(probe: dict[str, Any]) -> None:
    assert probe["old_step"] == {
        "status": "FAILED", "execution": "FAILED",
        "error": "no TASK handler is registered as 'demo.crash_if' on this worker"}


def test_the_demo_urls_are_404_and_nothing_writes_the_demo_tables(probe: dict[str, Any]) -> None:
    assert probe["ledger_entries"] == 404
    assert probe["ledger_switch"] == 404
    assert probe["rate_limits"] == {"status": 200, "demo_switch": False}
    assert probe["demo_tables_unchanged"] is True


@pytest.mark.parametrize("command", ["bench", "bench_ui", "chaos"])
def test_the_benchmark_and_chaos_commands_do_not_exist(probe: dict[str, Any], command: str) -> None:
    assert command not in probe["commands"]
    assert {"qcluster", "sb_up"} <= set(probe["commands"])  # the probe does see the real commands


def test_manage_py_does_not_know_the_chaos_command(production_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "chaos", "--help"],
                          cwd=ROOT, env=production_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Unknown command: 'chaos'" in done.stderr
