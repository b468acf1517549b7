"""The README's curl walkthrough (docs/examples/api-tour.sh) runs end to end against a live
server with a real qcluster: publish, fan out, follow, list failed children, repair, retry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from demo.models import DemoLedgerEntry
from executions.models import Execution
from tests.support import ROOT, factories, helpers
from workflows.access import create_token

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TOUR = ROOT / "docs" / "examples" / "api-tour.sh"


def test_the_curl_tour_succeeds_end_to_end(qcluster: Any, live_server: Any) -> None:
    assert shutil.which("curl"), "the API tour needs curl (a system package)"
    _, token = create_token(factories.default_workspace(), name="tour", role="author")
    qcluster(workers=2)
    env = {**os.environ, "BASE": live_server.url, "TOKEN": token, "RUN": "e2e", "PYTHON": sys.executable,
           "TIMEOUT": "90"}
    result = subprocess.run(["bash", str(TOUR)], env=env, capture_output=True, text=True, timeout=200, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    parent = Execution.objects.get(idempotency_key="tour-e2e")
    assert parent.status == "SUCCEEDED", output[-3000:]
    assert helpers.child_counts(parent) == {"SUCCEEDED": 12}
    assert set(Execution.objects.filter(parent=parent).values_list("attempt", flat=True)) == {2}
    assert DemoLedgerEntry.objects.count() == 12
    assert "HTTP 200" in output and "#0 " in output and '"retried": 12' in output
