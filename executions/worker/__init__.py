"""The worker: django-q2 task functions that drain ready steps in batches, and their parts.

One concept per module:

* ``tasks`` — the django-q2 task functions ``drain``, ``tick`` and ``bulk`` (queued tasks and
  schedules name them ``executions.worker.drain`` / ``executions.worker.tick``) and the
  worker process's start-up hook;
* ``loop`` — the drain loop (``Drain``): claim, run, commit, look after the rest;
* ``policy`` — what a drain claims next (rooms per kind, roles): a pure function;
* ``roles`` — a drain's role among the live drains and its abstain lock;
* ``gates`` — a drain's slots at each destination (``SlotGate``) and their hand-over;
* ``commits`` — committing finished steps, with retry, reconnect and bisection;
* ``housekeeping`` — heartbeat and fence-off, reaping, the idle wait, stop checks;
* ``runners``, ``pools``, ``futures``, ``inflight`` — where a step runs and how its result
  comes back;
* ``slots`` — drain slots (session advisory locks); ``runtime`` — a task queue a SIGKILL
  cannot wedge; ``interpreter`` — GC and switch-interval tuning, once per worker process;

The package imports the engine core; the core never imports it. What the core needs of the
workers lives below it: ``executions.kick`` (waking drains) and ``executions.registry`` (the
live worker processes, the drain slots). ``__init__`` re-exports what other code uses.
"""

from executions.worker.commits import CONNECTION_LOST, connection_lost
from executions.worker.futures import StepFuture
from executions.worker.gates import SlotGate
from executions.worker.housekeeping import NEXT_DUE, WORK_PENDING, cluster_stopping, work_pending
from executions.worker.inflight import InFlight
from executions.worker.loop import Drain
from executions.worker.pools import InlineExecutor, StepLoop, StepPool
from executions.worker.tasks import bulk, drain, on_worker_spawn, tick

__all__ = [
    "CONNECTION_LOST",
    "NEXT_DUE",
    "WORK_PENDING",
    "Drain",
    "InFlight",
    "InlineExecutor",
    "SlotGate",
    "StepFuture",
    "StepLoop",
    "StepPool",
    "bulk",
    "cluster_stopping",
    "connection_lost",
    "drain",
    "on_worker_spawn",
    "tick",
    "work_pending",
]
