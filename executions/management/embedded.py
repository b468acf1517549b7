"""What ``sb_up`` does with the embedded PostgreSQL when it stops: stop it if starting this run
started it (settings.SB_EMBEDDED_DB says), else leave it running and say how to stop it. The
server itself is the site's (schemabridge_site/embedded_db.py), reached through ``sb_db``."""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command
from django.db import connections

STOP_HINT = "python manage.py sb_db stop"


def _server() -> dict[str, object] | None:
    found: dict[str, object] | None = getattr(settings, "SB_EMBEDDED_DB", None)
    return found


def on_stop(*, keep: bool) -> str:
    """What Ctrl-C will do, for the banner."""
    server = _server()
    if server is None:
        return "stops the web app and the workers (the database at DATABASE_URL is not ours to stop)"
    if server["started_here"] and not keep:
        return f"stops the web app, the workers and the embedded PostgreSQL this run started ({server['data_dir']})"
    return (f"stops the web app and the workers; the embedded PostgreSQL ({server['data_dir']}) keeps running "
            f"({'--keep-db' if keep else 'it was running before this run'}): `{STOP_HINT}` stops it")


def after_run(*, keep: bool) -> str:
    """Stop the embedded server if this run started it (and ``keep`` is off); the line to print."""
    server = _server()
    if server is None:
        return "Stopped."
    if server["started_here"] and not keep:
        connections.close_all()
        call_command("sb_db", "stop", stdout=_Quiet())
        return f"Stopped; the embedded PostgreSQL this run started ({server['data_dir']}) is stopped too."
    return (f"Stopped; the embedded PostgreSQL ({server['data_dir']}) keeps running. "
            f"`{STOP_HINT}` stops it.")


class _Quiet:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None
