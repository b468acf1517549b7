"""System actors (S15): ``manage.py sb_actor keygen|register|sign|deployment|list|deactivate|rotate``.

``keygen NAME`` writes a new Ed25519 private key (PEM, mode 0600) for the caller and
registers only its public key; ``register`` takes a public key made elsewhere (e.g. with
``openssl genpkey -algorithm ed25519``), so the private key never touches this machine.
``sign`` prints the claim headers for one request to a deployment and workspace, one ``Name: value`` per line (``curl
-H @file`` reads that), or as curl arguments with ``--format curl``. See docs/security.md.


Registering and rotating insert system actor rows, which the database refuses outside
``actor_admin()`` below (migration 0006): this command is the only code that opens it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from workflows import actors, claims, signing
from workflows.models import SystemActor

BY = "cli:sb_actor"
ACTOR_ADMIN = "schemabridge.actor_admin"


@contextlib.contextmanager
def actor_admin() -> Iterator[None]:
    """A transaction in which the database accepts new system actor rows: the insert guard
    (migration 0006) checks this transaction-local setting. Reset on the way out, so an
    enclosing transaction (a test's) does not keep it; on an error the rollback (to the
    savepoint, when nested) undoes it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, 'on', true)", [ACTOR_ADMIN])
        yield
        cursor.execute("SELECT set_config(%s, 'off', true)", [ACTOR_ADMIN])


class Command(BaseCommand):
    help = "Register, rotate, list and deactivate system actors; sign API requests as one."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        keygen = commands.add_parser("keygen", help="make a key pair, write the private key, register the public key")
        keygen.add_argument("name", help="the actor's name (sent as X-SB-Actor)")
        _patterns(keygen)
        keygen.add_argument("--out", help="private key file to create (default: ./NAME.ed25519.pem)")
        register = commands.add_parser("register", help="register a public key made elsewhere")
        register.add_argument("name")
        _patterns(register)
        register.add_argument("--public-key", required=True, metavar="FILE",
                              help="a PEM public key file, or a file holding the raw key in base64")
        sign = commands.add_parser("sign", help="print the claim headers for one request")
        sign.add_argument("--key", required=True, metavar="FILE", help="the actor's private key (PEM)")
        sign.add_argument("--actor", required=True, metavar="NAME")
        sign.add_argument("--workspace", required=True, metavar="SLUG",
                          help="the workspace of the API token the request is sent with")
        sign.add_argument("--deployment", metavar="ID", help="the deployment the request is sent to (default: "
                                                             "this one's SB_DEPLOYMENT_ID; see 'deployment')")
        sign.add_argument("method", help="HTTP method, e.g. POST")
        sign.add_argument("path", help="the request path as sent, query string included, e.g. /api/v1/executions")
        sign.add_argument("--body", metavar="FILE", help="the exact request body ('-' for standard input; "
                                                         "default: empty)")
        sign.add_argument("--format", choices=["headers", "curl"], default="headers",
                          help="'Name: value' lines (default) or curl -H arguments")
        commands.add_parser("deployment", help="print this deployment's id (SB_DEPLOYMENT_ID), which claims sign")
        listing = commands.add_parser("list", help="list actors: names, patterns, key fingerprints")
        listing.add_argument("--all", action="store_true", help="include deactivated keys")
        deactivate = commands.add_parser("deactivate", help="deactivate an actor's key for good")
        deactivate.add_argument("name")
        rotate = commands.add_parser("rotate", help="replace an actor's key: register a new one, deactivate the old")
        rotate.add_argument("name")
        rotate.add_argument("--out", help="private key file to create (default: ./NAME.ed25519.pem)")
        rotate.add_argument("--public-key", metavar="FILE", help="register this public key instead of making one")
        rotate.add_argument("--patterns", help="new comma-separated patterns (default: keep the old ones)")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            getattr(self, action)(options)
        except actors.ActorError as error:
            raise CommandError(str(error)) from error

    def keygen(self, options: dict[str, Any]) -> None:
        key = signing.new_private_key()
        path = _key_path(options["out"], options["name"])
        actors.clean_patterns(options["patterns"].split(","))  # refuse before writing anything
        _write_private(path, key)
        try:
            with actor_admin():
                actor = actors.register(options["name"], signing.public_text(key), options["patterns"].split(","),
                                        by=BY)
        except actors.ActorError:
            path.unlink()
            raise
        self._registered(actor, f"Private key written to {path} (mode 0600); keep it secret, it is not stored here.")

    def register(self, options: dict[str, Any]) -> None:
        with actor_admin():
            actor = actors.register(options["name"], _read(options["public_key"]).decode(),
                                    options["patterns"].split(","), by=BY)
        self._registered(actor, "Only the public key was given: the private key stays where it was made.")

    def rotate(self, options: dict[str, Any]) -> None:
        patterns = options["patterns"].split(",") if options["patterns"] else None
        if options["public_key"]:
            with actor_admin():
                actor = actors.rotate(options["name"], _read(options["public_key"]).decode(), by=BY,
                                      patterns=patterns)
            self._registered(actor, "The old key is deactivated; claims signed with it are refused from now on.")
            return
        key = signing.new_private_key()
        path = _key_path(options["out"], options["name"])
        _write_private(path, key)
        try:
            with actor_admin():
                actor = actors.rotate(options["name"], signing.public_text(key), by=BY, patterns=patterns)
        except actors.ActorError:
            path.unlink()
            raise
        self._registered(actor, f"New private key written to {path} (mode 0600). The old key is deactivated; "
                                "claims signed with it are refused from now on.")

    def deactivate(self, options: dict[str, Any]) -> None:
        actor = SystemActor.objects.filter(name=options["name"], active=True).first()
        if actor is None:
            raise CommandError(f"no active system actor '{options['name']}'")
        actors.deactivate(actor, by=BY)
        self.stdout.write(f"Deactivated system actor '{actor.name}' ({signing.fingerprint(actor.public_key)}).")

    def list(self, options: dict[str, Any]) -> None:
        rows = SystemActor.objects.order_by("name", "-created_at")
        if not options["all"]:
            rows = rows.filter(active=True)
        self.stdout.write(f"{'NAME':<24} {'ACTIVE':<7} {'KEY':<24} {'CREATED':<17} PATTERNS")
        for actor in rows:
            self.stdout.write(f"{actor.name:<24} {'yes' if actor.active else 'no':<7} "
                              f"{signing.fingerprint(actor.public_key):<24} {actor.created_at:%Y-%m-%d %H:%M} "
                              f"{','.join(actor.patterns)}")

    def sign(self, options: dict[str, Any]) -> None:
        try:
            key = signing.load_private_pem(_read(options["key"]))
        except ValueError as error:
            raise CommandError(f"{options['key']}: {error}") from error
        source = options["body"]
        body = b"" if source is None else sys.stdin.buffer.read() if source == "-" else _read(source)
        try:
            scope = signing.Scope(options["deployment"] or claims.deployment_id(), options["workspace"])
            headers = signing.sign(key, options["method"], options["path"], body, actor=options["actor"], scope=scope)
        except signing.MalformedClaim as error:
            raise CommandError(str(error)) from error
        for name, value in headers.items():
            line = f"{name}: {value}"
            self.stdout.write(f"-H {shlex.quote(line)}" if options["format"] == "curl" else line)

    def deployment(self, options: dict[str, Any]) -> None:
        self.stdout.write(claims.deployment_id())

    def _registered(self, actor: SystemActor, note: str) -> None:
        self.stdout.write(f"Registered system actor '{actor.name}' (key {signing.fingerprint(actor.public_key)}) "
                          f"for {', '.join(actor.patterns)}.")
        self.stdout.write(note)


def _patterns(parser: CommandParser) -> None:
    parser.add_argument("--patterns", default="system.*",
                        help="comma-separated workflow key patterns it may claim (default: system.*)")


def _key_path(out: str | None, name: str) -> Path:
    return Path(out or f"{name}.ed25519.pem")


def _write_private(path: Path, key: Any) -> None:
    """Create the key file readable by its owner only; never overwrite one."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as error:
        raise CommandError(f"{path} exists; choose another --out (an existing key is never overwritten)") from error
    except OSError as error:
        raise CommandError(f"cannot create {path}: {error}") from error
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(signing.private_pem(key))


def _read(source: str) -> bytes:
    try:
        return Path(source).read_bytes()
    except OSError as error:
        raise CommandError(f"cannot read {source}: {error}") from error
