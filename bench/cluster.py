"""``bench cluster``: several worker hosts on one PostgreSQL, one of them lost halfway.

The miniature of a real deployment, on one machine (root is needed):

* one network namespace per host, linked to the host side by a veth pair: host *i* gets
  the link ``10.231.<n>.0/24`` (host side ``.1``, namespace side ``.2``) and no other route,
  so a namespace reaches the host-side address of its own link and nothing else; the
  addresses exist only on links this bench creates;
* a dedicated PostgreSQL (the pgserver binaries, a throw-away data folder) listening on the
  host-side addresses only, with password (scram-sha-256) authentication for one role;
* with ``--broker redis``, a redis-server bound to those addresses (its own process);
* a ``qcluster`` inside each namespace (``ip netns exec``) reaching the database over TCP
  only, with ``SB_WORKER_NAME=host-<i>`` so leases name their host.

The driver (this command again, re-run with ``--driver``) starts a fan-out, SIGKILLs every
process of the last host (``ip netns pids``) once half the children finished, waits for the
rest and checks: every child exactly once, none lost, every surviving host ran children.

Everything made is removed in ``finally`` — processes, namespaces (which takes their veth
ends), the data folder — also on SIGINT/SIGTERM.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import ROOT

SUBNET = ipaddress.ip_network("10.231.0.0/16")  # only ever on the veth links made here
PG_PORT = 5432
REDIS_PORT = 6379
ROLE = "sbcluster"
DATABASE = "schemabridge_cluster"
WORKERS_PER_HOST = 2
LEASE_SECONDS = "5"  # a lost host's in-flight steps are taken over after this long
HEARTBEAT_SECONDS = "1"
TTL_SECONDS = "6"


class ClusterBenchError(RuntimeError):
    """The miniature cannot be built here (not root, no ``ip``, no redis-server, ...)."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60)  # noqa: S603


@dataclass
class Host:
    index: int
    tag: str
    octet: int

    @property
    def name(self) -> str:
        return f"host-{self.index}"

    @property
    def netns(self) -> str:
        return f"sbc-{self.tag}-{self.index}"

    @property
    def veth_host(self) -> str:
        return f"sbc{self.tag}h{self.index}"

    @property
    def veth_ns(self) -> str:
        return f"sbc{self.tag}n{self.index}"

    @property
    def host_address(self) -> str:
        return f"10.231.{self.octet}.1"

    @property
    def ns_address(self) -> str:
        return f"10.231.{self.octet}.2"


@dataclass
class Miniature:
    """What was made, so that ``teardown`` removes exactly that."""

    hosts: list[Host] = field(default_factory=list)
    netns_made: list[str] = field(default_factory=list)
    workdir: Path | None = None
    pg_data: Path | None = None
    pg_user: str | None = None
    redis: subprocess.Popen[bytes] | None = None
    clusters: list[subprocess.Popen[bytes]] = field(default_factory=list)


def check_machine(broker: str) -> None:
    """Refuse early, with the reason, where the miniature cannot be built."""
    if os.geteuid() != 0:
        raise ClusterBenchError("bench cluster needs root (it creates network namespaces)")
    if shutil.which("ip") is None:
        raise ClusterBenchError("bench cluster needs the `ip` command (apt-get install iproute2)")
    if broker == "redis" and shutil.which("redis-server") is None:
        raise ClusterBenchError("--broker redis needs redis-server (apt-get install redis-server)")


def netns_works() -> tuple[bool, str]:
    """Can this machine create a network namespace? (root, iproute2, kernel support)"""
    try:
        check_machine("orm")
    except ClusterBenchError as error:
        return False, str(error)
    name = f"sbc-probe-{secrets.token_hex(3)}"
    made = _run("ip", "netns", "add", name, check=False)
    if made.returncode != 0:
        return False, f"`ip netns add` failed: {made.stderr.strip()}"
    _run("ip", "netns", "del", name, check=False)
    return True, ""


def _free_octets(count: int) -> list[int]:
    """``count`` third octets whose 10.231.x.0/24 no interface of this machine uses."""
    shown = _run("ip", "-4", "-o", "addr", "show").stdout
    used = {int(word.split(".")[2]) for word in shown.split() if word.startswith("10.231.")}
    free = [octet for octet in range(1, 255) if octet not in used]
    if len(free) < count:
        raise ClusterBenchError("no free 10.231.x.0/24 links left (stale bench namespaces? see `ip netns`)")
    return free[:count]


def build_network(mini: Miniature, hosts: int) -> None:
    tag = secrets.token_hex(2)
    mini.hosts = [Host(i + 1, tag, octet) for i, octet in enumerate(_free_octets(hosts))]
    for host in mini.hosts:
        assert ipaddress.ip_address(host.host_address) in SUBNET  # noqa: S101 - the only addresses we use
        _run("ip", "netns", "add", host.netns)
        mini.netns_made.append(host.netns)
        # Created inside the namespace's lifetime: deleting the namespace deletes both ends.
        _run("ip", "link", "add", host.veth_host, "type", "veth", "peer", "name", host.veth_ns)
        _run("ip", "link", "set", host.veth_ns, "netns", host.netns)
        _run("ip", "addr", "add", f"{host.host_address}/24", "dev", host.veth_host)
        _run("ip", "link", "set", host.veth_host, "up")
        inside = ("ip", "netns", "exec", host.netns)
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "addr", "add", f"{host.ns_address}/24", "dev", host.veth_ns)
        _run(*inside, "ip", "link", "set", host.veth_ns, "up")
        # No default route: the namespace reaches its link's host side and nothing else.


def start_database(mini: Miniature, password: str) -> None:
    """A dedicated PostgreSQL listening on the host-side link addresses only; the role
    ``sbcluster`` logs in with a password (scram-sha-256) from the links."""
    from schemabridge_site import embedded_db

    embedded_db._import_pgserver()
    from pgserver._commands import POSTGRES_BIN_PATH

    assert mini.workdir is not None  # noqa: S101 - set by run()
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: pgserver's system user runs it
        from pgserver.utils import ensure_user_exists

        ensure_user_exists("pgserver")
        user = "pgserver"
        entry = pwd.getpwnam(user)
        os.chown(mini.workdir, entry.pw_uid, entry.pw_gid)
    mini.pg_user = user
    data = mini.workdir / "pgdata"
    mini.pg_data = data
    subprocess.run([str(POSTGRES_BIN_PATH / "initdb"), "-D", str(data), "-U", "postgres", "--encoding=utf8",  # noqa: S603
                    "--auth-local=trust", "--auth-host=scram-sha-256"],
                   check=True, capture_output=True, user=user, timeout=120)
    hba = ["local all postgres trust"] + [f"host {DATABASE} {ROLE} {host.host_address}/24 scram-sha-256"
                                          for host in mini.hosts]
    (data / "pg_hba.conf").write_text("\n".join(hba) + "\n")
    listen = ",".join(host.host_address for host in mini.hosts)
    options = f"-c listen_addresses={listen} -p {PG_PORT} -k {mini.workdir} -c max_connections=300 " \
              "-c shared_buffers=128MB -c password_encryption=scram-sha-256"
    subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-w",  # noqa: S603
                    "-o", options, "start"],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   user=user, timeout=120)
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=str(mini.workdir), port=PG_PORT, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(ROLE), sql.Literal(password)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(DATABASE), sql.Identifier(ROLE)))


def stop_database(mini: Miniature) -> None:
    if mini.pg_data is None or not (mini.pg_data / "postmaster.pid").exists():
        return
    from pgserver._commands import POSTGRES_BIN_PATH

    subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(mini.pg_data), "-m", "immediate", "-w", "stop"],  # noqa: S603
                   check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   user=mini.pg_user, timeout=60)


def start_redis(mini: Miniature) -> None:
    assert mini.workdir is not None  # noqa: S101 - set by run()
    mini.redis = subprocess.Popen(  # noqa: S603
        ["redis-server", "--bind", *(host.host_address for host in mini.hosts), "--port", str(REDIS_PORT),  # noqa: S607
         "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", str(mini.workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    import redis

    deadline = time.monotonic() + 20
    while True:
        try:
            redis.Redis(host=mini.hosts[0].host_address, port=REDIS_PORT).ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline or mini.redis.poll() is not None:
                raise ClusterBenchError("redis-server did not start") from None
            time.sleep(0.1)


def host_env(host: Host, password: str, broker: str, workers: int) -> dict[str, str]:
    """The environment of a host's processes: the database (and Redis) over TCP only."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "REDIS_URL", "SB_DB_NAME", "SB_PGDATA", "SB_DRAIN_SLOTS"}}
    env.update({
        "DATABASE_URL": f"postgres://{ROLE}:{password}@{host.host_address}:{PG_PORT}/{DATABASE}",
        "SB_WORKER_NAME": host.name, "SB_WORKERS": str(workers), "SB_DEMO": "1", "LOG_LEVEL": "WARNING",
        "SB_LEASE_SECONDS": LEASE_SECONDS, "SB_WORKER_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
        "SB_WORKER_TTL_SECONDS": TTL_SECONDS, "SB_DRAIN_IDLE_SECONDS": "5",
    })
    if broker == "redis":
        env["REDIS_URL"] = f"redis://{host.host_address}:{REDIS_PORT}/0"
    return env


def start_clusters(mini: Miniature, password: str, broker: str, workers: int) -> None:
    for host in mini.hosts:
        mini.clusters.append(subprocess.Popen(  # noqa: S603
            ["ip", "netns", "exec", host.netns, sys.executable, str(ROOT / "manage.py"), "qcluster"],  # noqa: S607
            cwd=ROOT, env=host_env(host, password, broker, workers),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))


def namespace_pids(netns: str) -> list[int]:
    listed = _run("ip", "netns", "pids", netns, check=False).stdout
    return [int(word) for word in listed.split() if word.isdigit()]


def kill_host(netns: str) -> list[int]:
    """SIGKILL every process of a host (every process in its namespace)."""
    killed = []
    for _ in range(5):  # a sentinel may fork a replacement between listing and killing
        pids = namespace_pids(netns)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.1)
    return killed


def teardown(mini: Miniature) -> None:
    """Remove everything ``run`` made; every step is attempted whatever failed before."""
    for netns in mini.netns_made:
        with contextlib.suppress(Exception):
            kill_host(netns)
    for proc in mini.clusters:
        with contextlib.suppress(Exception):
            proc.wait(timeout=10)
    if mini.redis is not None and mini.redis.poll() is None:
        mini.redis.kill()
        with contextlib.suppress(Exception):
            mini.redis.wait(timeout=10)
    with contextlib.suppress(Exception):
        stop_database(mini)
    for netns in mini.netns_made:  # deleting a namespace deletes its veth pair too
        _run("ip", "netns", "del", netns, check=False)
    for host in mini.hosts:  # in case a namespace went before its link was moved into it
        if _run("ip", "link", "show", host.veth_host, check=False).returncode == 0:
            _run("ip", "link", "del", host.veth_host, check=False)
    if mini.workdir is not None:
        shutil.rmtree(mini.workdir, ignore_errors=True)


class Interrupted(BaseException):
    """SIGTERM/SIGHUP during the bench: unwind through ``finally`` (teardown)."""


def run(hosts: int, items: int, broker: str, workers: int = WORKERS_PER_HOST,
        timeout: float = 1800.0) -> dict[str, Any]:
    """Build the miniature, run the driver in it, tear it down; returns the driver's figures."""
    if hosts < 1 or items < 1 or workers < 1:
        raise ClusterBenchError("--hosts, --items and --workers must be at least 1")
    if hosts > 50:
        raise ClusterBenchError("--hosts is at most 50")
    check_machine(broker)
    mini = Miniature()
    password = secrets.token_urlsafe(24)

    def interrupted(signum: int, frame: Any) -> None:
        raise Interrupted(f"signal {signum}")

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        mini.workdir = Path(tempfile.mkdtemp(prefix="sb-cluster-"))
        build_network(mini, hosts)
        start_database(mini, password)
        if broker == "redis":
            start_redis(mini)
        first = host_env(mini.hosts[0], password, broker, workers)
        # Migrations and the driver run on the host side, over TCP like the workers.
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=first, cwd=ROOT,  # noqa: S603
                       check=True, timeout=600)
        start_clusters(mini, password, broker, workers)
        driver_env = {**first, "SB_WORKER_NAME": "bench-driver",
                      "SB_CLUSTER_HOSTS": ",".join(f"{host.name}={host.netns}" for host in mini.hosts)}
        done = subprocess.run(  # noqa: S603
            [sys.executable, str(ROOT / "manage.py"), "bench", "cluster", "--driver", "--hosts", str(hosts),
             "--items", str(items), "--workers", str(workers), "--broker", broker],
            env=driver_env, cwd=ROOT, capture_output=False, stdout=subprocess.PIPE, timeout=timeout, check=False)
        try:
            result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        except (IndexError, ValueError) as error:
            raise ClusterBenchError(f"the driver failed (exit {done.returncode}); see its output above") from error
        result["broker"] = broker
        return result
    finally:
        with contextlib.suppress(Exception):
            teardown(mini)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- the driver (inside the miniature's database) ---------------------------------------------------

def drive(hosts: int, items: int, workers: int) -> dict[str, Any]:
    """Run the fan-out on the live hosts, kill the last host halfway (with two hosts or more),
    and verify. Runs with DATABASE_URL on the miniature's database."""
    from django.db import connection

    from bench import fanout
    from bench.common import wait_until
    from executions import registry
    from executions.services import lifecycle as services
    from workflows.models import Plan, Workspace

    named = dict(pair.split("=", 1) for pair in os.environ["SB_CLUSTER_HOSTS"].split(","))
    expected = hosts * workers

    def registered() -> tuple[bool, int]:
        with connection.cursor() as cursor:
            live = [host for host, _ in registry.live_workers(cursor) if host in named]
        return len(live) >= expected, len(live)

    wait_until(registered, total=expected, label="worker processes registering", timeout=120)
    with connection.cursor() as cursor:
        slots_before = registry.drain_slots(cursor)
    Plan.objects.filter(name="default").update(executions_per_day=1_000_000_000)
    workspace = Workspace.objects.get(slug="default")
    fanout.publish(workspace)
    killed_host = list(named)[-1] if hosts > 1 else None
    started = time.monotonic()
    execution = services.start_execution(workspace, workflow="bench-fanout", input={"items": list(range(items))},
                                         created_by="bench").execution
    killed: list[int] = []
    done_at_kill = None
    if killed_host is not None:
        wait_until(lambda: _half(execution.pk, items), total=items // 2, label="to half", timeout=900,
                   interval=0.01)  # poll closely: the kill must land while children still run
        killed = kill_host(named[killed_host])
        done_at_kill = fanout.counts(execution.pk)[1]
    wait_until(lambda: fanout.counts(execution.pk), total=items, label=f"cluster fanout {items:,}", timeout=1800)
    seconds_total = time.monotonic() - started
    verdict = _verify(execution.pk, items)
    survivors = [name for name in named if name != killed_host]
    per_host = verdict.pop("children_per_host")
    slots_after = _slots_once_expired(killed_host, expected - workers) if killed_host else None
    ok = (slots_before == expected and verdict["duplicates"] == 0 and verdict["lost"] == 0
          and verdict["merge"] == "SUCCEEDED"
          and all(per_host.get(name, 0) > 0 for name in survivors)
          and (killed_host is None or (bool(killed) and slots_after == expected - workers)))
    return {"hosts": hosts, "items": items, "workers_per_host": workers, "seconds_total": round(seconds_total, 3),
            "children_per_host": {name: per_host.get(name, 0) for name in named} | {
                name: count for name, count in per_host.items() if name not in named},
            "killed_host": killed_host, "killed_processes": len(killed), "children_done_at_kill": done_at_kill,
            "drain_slots_before_kill": slots_before, "drain_slots_after_kill": slots_after, **verdict, "ok": ok}


def _half(execution_id: Any, items: int) -> tuple[bool, int]:
    from bench import fanout

    _, done = fanout.counts(execution_id)
    return done >= items // 2, min(done, items // 2)


def _slots_once_expired(killed_host: str, expected: int, timeout: float = 30.0) -> int:
    """The drain slots once the killed host's registrations expired (TTL_SECONDS)."""
    from django.db import connection

    from executions import registry

    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cursor:
            slots = registry.drain_slots(cursor)
            gone = all(host != killed_host for host, _ in registry.live_workers(cursor))
        if (gone and slots == expected) or time.monotonic() > deadline:
            return slots
        time.sleep(0.2)


def _verify(execution_id: Any, items: int) -> dict[str, Any]:
    """Every item has exactly one child, which succeeded; who ran each child (its work
    step's ``leased_by`` host)."""
    from django.db import connection

    from executions.models import Step

    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT count(*), count(DISTINCT item_index),
                   count(DISTINCT item_index) FILTER (WHERE status = 'SUCCEEDED')
            FROM executions_execution WHERE parent_id = %s""", [execution_id])
        children, distinct, succeeded = cursor.fetchone()
        cursor.execute("""
            SELECT split_part(s.leased_by, ':', 1), count(*)
            FROM executions_execution e JOIN executions_step s ON s.execution_id = e.id AND s.vertex = 'work'
            WHERE e.parent_id = %s GROUP BY 1 ORDER BY 1""", [execution_id])
        per_host = {host or "?": int(count) for host, count in cursor.fetchall()}
    merge = Step.objects.get(execution_id=execution_id, vertex="join")
    return {"children": children, "duplicates": children - distinct, "lost": items - succeeded,
            "merge": merge.status, "children_per_host": per_host}
