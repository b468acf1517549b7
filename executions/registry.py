"""The worker registry: which worker processes are alive, across every host.

Each django-q2 worker process registers a row in ``executions_workerprocess`` when it is
spawned (host, pid, cluster, started, last_seen) and a daemon thread refreshes its
``last_seen`` every ``SB_WORKER_HEARTBEAT_SECONDS`` with one UPDATE — never per step. All
times are database time, so hosts with skewed clocks agree.

A row is *live* while ``last_seen`` is younger than ``SB_WORKER_TTL_SECONDS``. The number of
live rows is the number of drain slots (executions/worker/slots.py, kick.py): every worker process can hold a
drain, and a host that dies (SIGKILL, power loss, a cut network) stops counting once its rows
expire; the tick deletes expired rows. ``SB_DRAIN_SLOTS``, when set, caps the count.

This module imports nothing from the project (kick.py and leases.py use it).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from executions.platform.hosts import worker_host

log = logging.getLogger(__name__)

REGISTER = """
    INSERT INTO executions_workerprocess (host, pid, cluster, started, last_seen)
    VALUES (%(host)s, %(pid)s, %(cluster)s, now(), now())
    ON CONFLICT (host, pid) DO UPDATE SET cluster = EXCLUDED.cluster, started = now(), last_seen = now()
"""
# The heartbeat: one guarded UPDATE of this process's own row. No row (it expired and was
# deleted while this process was stalled) means: register again.
HEARTBEAT = """
    UPDATE executions_workerprocess SET last_seen = now()
    WHERE host = %(host)s AND pid = %(pid)s
"""
UNREGISTER = "DELETE FROM executions_workerprocess WHERE host = %(host)s AND pid = %(pid)s"
EXPIRE = """
    DELETE FROM executions_workerprocess
    WHERE last_seen < now() - make_interval(secs => %(ttl)s)
"""
LIVE = "(SELECT count(*) FROM executions_workerprocess WHERE last_seen >= now() - make_interval(secs => %(ttl)s))"
# Drain slots as an SQL expression: the live workers, capped by SB_DRAIN_SLOTS (least()
# ignores a NULL cap), and at least one, so work still drains before any worker registered
# (a drain run by hand, the tests' synchronous runs).
SLOTS = f"greatest(1, least(%(slot_cap)s, {LIVE}))"


def slot_params() -> dict[str, Any]:
    """The parameters ``SLOTS`` needs."""
    cap = settings.SB["DRAIN_SLOTS"]
    return {"slot_cap": int(cap) if cap else None, "ttl": float(settings.SB["WORKER_TTL_SECONDS"])}


def drain_slots(cursor: Any) -> int:
    """How many drains may be alive at once, deployment-wide (see the module doc)."""
    cursor.execute(f"SELECT {SLOTS}", slot_params())
    return int(cursor.fetchone()[0])


def live_workers(cursor: Any) -> list[tuple[str, int]]:
    """The live worker processes as (host, pid), oldest first."""
    cursor.execute(
        "SELECT host, pid FROM executions_workerprocess "
        "WHERE last_seen >= now() - make_interval(secs => %(ttl)s) ORDER BY started, id",
        slot_params())
    return [(host, int(pid)) for host, pid in cursor.fetchall()]


def _identity(pid: int | None = None) -> dict[str, Any]:
    return {"host": worker_host(), "pid": os.getpid() if pid is None else pid}


def register(cursor: Any, *, cluster: str = "", pid: int | None = None) -> None:
    """Register (or re-register) this process, and delete expired registrations."""
    cursor.execute(REGISTER, {**_identity(pid), "cluster": cluster})
    expire(cursor)


def heartbeat(cursor: Any, *, cluster: str = "", pid: int | None = None) -> None:
    """Refresh this process's ``last_seen``; re-register if its row is gone."""
    cursor.execute(HEARTBEAT, _identity(pid))
    if cursor.rowcount == 0:
        register(cursor, cluster=cluster, pid=pid)


def unregister(cursor: Any, *, pid: int | None = None) -> None:
    cursor.execute(UNREGISTER, _identity(pid))


def expire(cursor: Any) -> int:
    """Delete registrations not heard from within the TTL; returns how many."""
    cursor.execute(EXPIRE, {"ttl": float(settings.SB["WORKER_TTL_SECONDS"])})
    return int(cursor.rowcount)


# --- the heartbeat thread of a worker process ----------------------------------------------------

_beating: threading.Event | None = None


def start_heartbeat(cluster: str = "") -> None:
    """In a (freshly forked) worker process: register now and keep the row alive from a
    daemon thread. Idempotent per process. A database that is down is waited out: the
    thread logs and tries again at the next beat."""
    global _beating
    if _beating is not None:
        return
    _beating = threading.Event()
    threading.Thread(target=_beat, args=(_beating, cluster), name="sb-worker-heartbeat", daemon=True).start()


def _beat(stop: threading.Event, cluster: str) -> None:
    every = float(settings.SB["WORKER_HEARTBEAT_SECONDS"])
    first = True
    while True:
        try:
            close_old_connections()
            with connection.cursor() as cursor:
                if first:
                    register(cursor, cluster=cluster)
                else:
                    heartbeat(cursor, cluster=cluster)
            first = False
        except DatabaseError as error:
            log.warning("worker heartbeat failed (%s); retrying in %ss", error, every)
            connection.close()
        except Exception:
            log.exception("worker heartbeat failed; retrying")
        if stop.wait(every):
            return
