"""Manage the embedded PostgreSQL: ``manage.py sb_db status|start|stop|restart``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from schemabridge_site import embedded_db


class Command(BaseCommand):
    help = "Show, start, stop or restart the embedded PostgreSQL (used when DATABASE_URL is unset)."

    # Settings would start the server on import; `stop` must be able to run without that.
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "start", "stop", "restart"])

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "stop":
            stopped = embedded_db.stop()
            self.stdout.write("stopped" if stopped else "not running")
        elif action == "restart":
            embedded_db.restart()
            self.stdout.write("restarted")
        else:
            server = embedded_db.ensure_running()
            self.stdout.write(f"running: data {server.data_dir}, socket {server.socket_dir}, port {server.port}")
