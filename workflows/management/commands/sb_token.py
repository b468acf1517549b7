"""API tokens: ``manage.py sb_token create [--expires-in 90d]|list|revoke``.

``create`` prints a few explanatory lines and then the secret alone on the last line, so
scripts can take it with ``| tail -n 1``. Only a hash of the secret is stored: it cannot be
shown again.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q
from django.utils import timezone

from workflows import audit
from workflows.access import create_token, revoke_token
from workflows.models import ApiToken, Role, Workspace

ACTOR = "cli:sb_token"


class Command(BaseCommand):
    help = "Create, list and revoke API tokens (Authorization: Token <secret>)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create a token and print its secret (shown once)")
        create.add_argument("--workspace", default="default", help="workspace slug (default: default)")
        create.add_argument("--role", default=Role.VIEWER, choices=list(Role.values),
                            help="viewer (read), operator (+ start, retry, cancel, destinations), "
                                 "author (+ publish), admin")
        create.add_argument("--name", help="a label to recognise it by (default: <role>-<date>-<time>)")
        create.add_argument("--expires-in", type=_duration, metavar="DURATION",
                            help="refuse it after this long: a number and a unit, e.g. 90d, 12h, 30m "
                                 "(default: until revoked)")
        listing = actions.add_parser("list", help="list tokens (never their secrets)")
        listing.add_argument("--workspace", help="only this workspace")
        listing.add_argument("--all", action="store_true", help="include revoked tokens")
        revoke = actions.add_parser("revoke", help="revoke a token by name or prefix")
        revoke.add_argument("token", metavar="NAME_OR_PREFIX")
        revoke.add_argument("--workspace", default="default", help="workspace slug (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        {"create": self.create, "list": self.list, "revoke": self.revoke}[options["action"]](options)

    def create(self, options: dict[str, Any]) -> None:
        workspace = _workspace(options["workspace"])
        name = options["name"] or f"{options['role']}-{timezone.now():%Y%m%d-%H%M%S}"
        token, secret = create_token(workspace, name=name, role=options["role"], created_by=ACTOR,
                                     expires_in=options["expires_in"])
        expires = f"{token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never"
        detail = {"role": token.role, "expires_at": token.expires_at.isoformat() if token.expires_at else None}
        audit.record(ACTOR, "token.create", workspace=workspace, target=token.name, detail=detail)
        self.stdout.write(f"Created token '{token.name}' ({token.role}) in workspace '{workspace.slug}'; "
                          f"it expires {expires}.")
        self.stdout.write("Send it as 'Authorization: Token <secret>'. It is shown only now; store it safely.")
        self.stdout.write(secret)

    def list(self, options: dict[str, Any]) -> None:
        tokens = ApiToken.objects.select_related("workspace").order_by("workspace__slug", "created_at")
        if options["workspace"]:
            tokens = tokens.filter(workspace__slug=options["workspace"])
        if not options["all"]:
            tokens = tokens.filter(revoked_at__isnull=True)
        self.stdout.write(f"{'WORKSPACE':<16} {'NAME':<32} {'PREFIX':<13} {'ROLE':<9} {'CREATED':<17} "
                          f"{'LAST USED':<17} {'EXPIRES':<17} REVOKED")
        for token in tokens:
            self.stdout.write(f"{token.workspace.slug:<16} {token.name:<32} {token.prefix:<13} {token.role:<9} "
                              f"{_when(token.created_at):<17} {_when(token.last_used_at):<17} "
                              f"{_when(token.expires_at):<17} {_when(token.revoked_at)}")

    def revoke(self, options: dict[str, Any]) -> None:
        workspace = _workspace(options["workspace"])
        wanted = options["token"]
        matches = list(ApiToken.objects.filter(workspace=workspace, revoked_at__isnull=True)
                       .filter(Q(name=wanted) | Q(prefix=wanted)))
        if not matches:
            raise CommandError(f"no active token named or prefixed '{wanted}' in workspace '{workspace.slug}'")
        if len(matches) > 1:
            found = ", ".join(f"{token.name} ({token.prefix})" for token in matches)
            raise CommandError(f"'{wanted}' matches {len(matches)} tokens ({found}); revoke one by its prefix")
        revoke_token(matches[0])
        audit.record(ACTOR, "token.revoke", workspace=workspace, target=matches[0].name)
        self.stdout.write(f"Revoked token '{matches[0].name}' ({matches[0].prefix}).")


def _workspace(slug: str) -> Workspace:
    try:
        return Workspace.objects.get(slug=slug)
    except Workspace.DoesNotExist as error:
        raise CommandError(f"no workspace '{slug}'") from error


_UNITS = {"m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> timedelta:
    """``90d``, ``12h`` or ``30m``: a positive whole number and a unit."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isdigit() or int(number) == 0 or int(number) > 100_000:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration such as 90d, 12h or 30m")
    return timedelta(seconds=int(number) * _UNITS[unit])


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "-"
