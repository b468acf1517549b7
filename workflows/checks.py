"""System checks that refuse an unsafe configuration at ``manage.py check``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.db import connections


@register()
def database_is_postgresql(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors = []
    for alias in connections:
        vendor = connections[alias].vendor
        if vendor != "postgresql":
            errors.append(Error(
                f"Database '{alias}' uses {vendor}; SchemaBridge runs on PostgreSQL only "
                "(its guarantees are PostgreSQL constraints, row locks and SKIP LOCKED).",
                hint="Unset DATABASE_URL to use the embedded PostgreSQL, or point it at a PostgreSQL server.",
                id="schemabridge.E001",
            ))
    return errors


@register()
def time_zone_support(app_configs: Any, **kwargs: Any) -> list[Error]:
    if not settings.USE_TZ:
        return [Error("USE_TZ must be True: leases and timers are compared with database time in UTC.",
                      id="schemabridge.E002")]
    return []


@register()
def q_retry_exceeds_timeout(app_configs: Any, **kwargs: Any) -> list[Error]:
    conf = getattr(settings, "Q_CLUSTER", {})
    timeout, retry = conf.get("timeout"), conf.get("retry")
    if timeout is None or retry is None or retry <= timeout:
        return [Error(
            f"Q_CLUSTER['retry'] ({retry}) must be greater than Q_CLUSTER['timeout'] ({timeout}); "
            "otherwise a task still running is handed to a second worker.",
            id="schemabridge.E003",
        )]
    return []
