"""``bench cluster`` (issue 17 §4): worker hosts in network namespaces reach one PostgreSQL
over TCP; one host is SIGKILLed halfway and the others finish every child exactly once.
Needs root and ``ip netns`` (CI runs as root); skipped with the reason elsewhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from bench.cluster import netns_works
from tests.support import ROOT
from tests.support.cluster import manage

pytestmark = [pytest.mark.fault, pytest.mark.e2e]



@pytest.fixture
def netns() -> None:
    """Skip, with the reason, where this machine cannot create network namespaces (not root,
    no iproute2); CI runs as root, so there the tests run."""
    usable, why_not = netns_works()
    if not usable:
        pytest.skip(f"bench cluster cannot build namespaces here: {why_not}")


def bench_namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.startswith("sbc-")}


def bench_links() -> set[str]:
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in listed.splitlines()
            if line.split(":")[1].strip().startswith("sbc")}


# Enough that half of them take a fast machine far longer than noticing "half" and the kill
# (2,000 no-op children once finished before the kill landed).
ITEMS = 5000


@pytest.mark.timeout(420)
def test_two_hosts_one_killed_halfway_every_child_exactly_once(netns):
    namespaces_before, links_before = bench_namespaces(), bench_links()
    finished = manage("bench", "cluster", "--hosts", "2", "--items", str(ITEMS), "--json", timeout=400)
    assert finished.stdout.strip(), finished.stderr[-3000:]
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert finished.returncode == 0 and result["ok"], (result, finished.stderr[-3000:])
    assert set(result) >= {"hosts", "items", "seconds_total", "children_per_host", "killed_host", "duplicates",
                           "lost", "ok"}
    assert (result["hosts"], result["items"], result["duplicates"], result["lost"]) == (2, ITEMS, 0, 0)
    assert result["killed_host"] == "host-2" and result["killed_processes"] > 0
    assert result["children_per_host"]["host-1"] > 0
    assert sum(result["children_per_host"].values()) == ITEMS
    assert result["children_done_at_kill"] < ITEMS  # the kill came while children were still running
    assert (result["drain_slots_before_kill"], result["drain_slots_after_kill"]) == (4, 2)  # slots follow hosts
    assert bench_namespaces() == namespaces_before and bench_links() == links_before  # all removed


@pytest.mark.timeout(300)
def test_an_interrupted_bench_removes_its_namespaces_links_and_processes(netns, tmp_path):
    before = bench_namespaces()
    log = tmp_path / "bench.log"
    with open(log, "wb") as output:
        proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "bench", "cluster",
                                 "--hosts", "2", "--items", "200000", "--json"], cwd=ROOT, env=os.environ.copy(),
                                stdout=subprocess.DEVNULL, stderr=output)
    try:
        deadline = time.monotonic() + 120
        made: set[str] = set()
        while time.monotonic() < deadline and len(made) < 2:
            made = bench_namespaces() - before
            time.sleep(0.2)
        assert len(made) == 2, log.read_text(errors="replace")[-3000:]
        # Wait until workers run inside them, then interrupt as an operator would.
        while time.monotonic() < deadline and not all(_pids(name) for name in made):
            time.sleep(0.2)
        workers = {int(pid) for name in made for pid in _pids(name)}
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert workers and not any(psutil.pid_exists(pid) for pid in workers)
    assert not (bench_namespaces() & made), log.read_text(errors="replace")[-3000:]
    assert not any(link.startswith(f"sbc{name.split('-')[1]}") for link in bench_links() for name in made)


def _pids(netns: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False)
    return listed.stdout.split()
