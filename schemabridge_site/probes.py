"""Endpoints for load balancers, orchestrators and Prometheus (docs/operations.md).

* ``/healthz`` — the process is alive and answers (no database access).
* ``/readyz`` — ready to serve: the database answers, every migration is applied, and at
  least one worker was heard from within the last 30 s. 200 or 503, with the checks in a
  small JSON body.
* ``/metrics`` — the Prometheus text format, only with ``Authorization: Bearer <token>``
  where the token is ``SB_METRICS_TOKEN``; without that setting the endpoint does not exist
  (404), and a missing or wrong token is answered 404 as well, so a scanner learns nothing.
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from prometheus_client import CONTENT_TYPE_LATEST

from executions.platform import metrics

log = logging.getLogger(__name__)

_migrated = False  # once true, true for the life of the process: its code (and migrations) cannot change


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": False, "migrations": False, "workers": 0}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = True
        checks["migrations"] = migrations_applied()
        checks["workers"] = _live_workers()
    except DatabaseError:
        connection.close()  # a broken connection must not be reused by the next request
    ok = bool(checks["database"] and checks["migrations"] and checks["workers"])
    return JsonResponse({"ok": ok, **checks}, status=200 if ok else 503)


def _live_workers() -> int:
    try:
        return metrics.live_workers()
    except Exception:
        # The broker's store (the cache table, or Redis) is unreachable: no worker is known,
        # so the answer is 503, never a 500.
        log.warning("readyz: could not read the workers' status", exc_info=True)
        return 0


def migrations_applied() -> bool:
    """No migration of any installed app is left to apply on the default database."""
    global _migrated
    if not _migrated:
        executor = MigrationExecutor(connection)
        _migrated = not executor.migration_plan(executor.loader.graph.leaf_nodes())
    return _migrated


@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _authorised(request):
        raise Http404
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


def _authorised(request: HttpRequest) -> bool:
    token = str(settings.SB.get("METRICS_TOKEN") or "")
    if not token:
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Compared in constant time, as bytes (compare_digest refuses non-ASCII str).
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
