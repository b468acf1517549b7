"""Manage the embedded PostgreSQL: ``manage.py sb_db status|start|stop|restart``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from schemabridge_site import embedded_db


class Command(BaseCommand):
    help = "Show, start, stop or restart the embedded PostgreSQL (used when DATABASE_URL is unset)."

    # Settings do not start the server for this command (settings.py), and nothing here runs
    # the checks that would connect: `status` and `stop` leave a stopped server stopped.
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
        elif action == "start":
            server = embedded_db.ensure_running()
            self.stdout.write(f"running: data {server.data_dir}, socket {server.socket_dir}, port {server.port}")
        else:
            found = embedded_db.running()
            if found is None:
                self.stdout.write(f"not running: data {embedded_db.data_dir()} (`python manage.py sb_db start` "
                                  "starts it; so does any command that needs the database)")
            else:
                self.stdout.write(f"running: data {found.data_dir}, socket {found.socket_dir}, port {found.port}")
