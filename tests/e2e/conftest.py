"""End-to-end fixtures: real ``manage.py qcluster`` subprocesses on the test database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.cluster import Cluster, ensure_tick_schedule


@pytest.fixture
def qcluster(transactional_db: Any) -> Iterator[Callable[..., Cluster]]:
    """Start real qclusters on the test database: ``cluster = qcluster(workers=2)``."""
    ensure_tick_schedule()
    started: list[Cluster] = []

    def start(workers: int = 2, **env: str) -> Cluster:
        cluster = Cluster(workers, env).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
