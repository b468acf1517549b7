"""gunicorn settings: ``gunicorn -c python:schemabridge_site.gunicorn_conf schemabridge_site.wsgi``
(``manage.py sb_up`` starts it so, with ``--bind``). docs/operations.md describes each knob.

SB_WEB_WORKERS  worker processes (default 2)
SB_WEB_THREADS  threads per worker process (default 4): requests wait on the database, not the CPU
SB_WEB_TIMEOUT  seconds a request may take before its worker is replaced (default 60)
LOG_FORMAT      "json": gunicorn's own lines (errors, access log) as JSON objects too
SB_ACCESS_LOG   where the access log goes: "-" standard output (default), a file path, or "off"
                (``manage.py sb_up`` writes it to .local/logs/access.log, so its banner stays readable)
"""

from __future__ import annotations

import os
from typing import Any

from schemabridge_site.logging import formatter_config

wsgi_app = "schemabridge_site.wsgi:application"
bind = [os.environ.get("SB_BIND", "127.0.0.1:8000")]
worker_class = "gthread"
workers = int(os.environ.get("SB_WEB_WORKERS", "2"))
threads = int(os.environ.get("SB_WEB_THREADS", "4"))
timeout = int(os.environ.get("SB_WEB_TIMEOUT", "60"))
graceful_timeout = 10
# Workers start after the master forks; the app (and its database connections) is never shared.
preload_app = False
accesslog = "-"
errorlog = "-"
ACCESS_LOG = os.environ.get("SB_ACCESS_LOG", "").strip() or "-"
_handlers: dict[str, Any] = {"console": {"class": "logging.StreamHandler", "formatter": "default",
                                         "stream": "ext://sys.stdout"}}
if ACCESS_LOG not in ("-", "off"):
    _handlers["access_file"] = {"class": "logging.FileHandler", "formatter": "default", "filename": ACCESS_LOG}
logconfig_dict: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"default": formatter_config(os.environ.get("LOG_FORMAT", ""))},
    "handlers": _handlers,
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": ["console"], "propagate": False},
        "gunicorn.access": {"level": "CRITICAL" if ACCESS_LOG == "off" else "INFO",
                            "handlers": {"-": ["console"], "off": []}.get(ACCESS_LOG, ["access_file"]),
                            "propagate": False},
    },
}


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: drop its live-gauge files from the metrics directory (its counters
    stay, so totals never go backwards). See executions/platform/metrics.py."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
