"""Fault-injection fixtures: a ``Lab`` whose real qcluster subprocesses use the test database."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from bench.chaos.lab import Lab
from tests.support.cluster import TEST_SETTINGS


@pytest.fixture
def lab(transactional_db: Any) -> Lab:
    """Short leases so that lost work is re-run within seconds; the test settings in the
    cluster; the pytest process is the orchestrator (and never a worker). The scenario's
    narration goes to stdout, which pytest shows with a failure."""
    return Lab(database=connection.settings_dict["NAME"], env=dict(TEST_SETTINGS),
               workers=2, lease_seconds=2.0, timeout=150.0, say=_say)


def _say(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, flush=True)
