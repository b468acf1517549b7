"""The embedded PostgreSQL server used when no ``DATABASE_URL`` is set.

The server binaries come from the ``pgserver`` package. The data folder lives inside the
project (``.pgdata/`` unless ``SB_PGDATA`` says otherwise) and is shared by every process
of the project: the web server, the qcluster workers, management commands and the tests.

The server outlives the process that started it (it is a small local daemon, like a
system PostgreSQL); ``python manage.py sb_db stop`` stops it, and ``manage.py sb_up`` (``make
run``) stops it on Ctrl-C when that run started it (``started_here``). Starting is serialised by an
exclusive file lock, so two processes starting at once cannot double-start or corrupt it:
the second one waits, then finds the server running and reuses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "schemabridge"

# Applied once, right after the cluster is created. Durability settings (fsync,
# synchronous_commit, full_page_writes) stay at PostgreSQL's safe defaults on purpose: the
# engine's guarantees are only as good as the commits under them.
TUNING = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "work_mem": "16MB",
    "maintenance_work_mem": "128MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "wal_compression": "on",
    "idle_in_transaction_session_timeout": "10min",
    "log_min_messages": "warning",
}
TUNED_MARKER = "schemabridge.tuned"


@dataclass(frozen=True)
class EmbeddedServer:
    data_dir: Path
    socket_dir: Path
    port: int

    def settings(self, name: str = DATABASE_NAME) -> dict[str, object]:
        """A Django ``DATABASES`` entry for this server."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": "postgres",
            "PASSWORD": "",
            "HOST": str(self.socket_dir),
            "PORT": str(self.port),
        }

    def conninfo(self, name: str = DATABASE_NAME) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname={name}"


def data_dir() -> Path:
    return Path(os.environ.get("SB_PGDATA") or PROJECT_DIR / ".pgdata").resolve()


@contextlib.contextmanager
def _project_lock(directory: Path) -> Iterator[None]:
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = directory.parent / f"{directory.name}.lock"
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pg_ctl(server: object, *args: str) -> None:
    _import_pgserver()
    from pgserver._commands import POSTGRES_BIN_PATH

    user = getattr(server, "system_user", None)
    pgdata = Path(server.pgdata)  # type: ignore[attr-defined]  # pgserver's PostgresServer
    # The server inherits pg_ctl's stdout/stderr; a pipe would keep this call waiting for
    # as long as the server lives. Its output goes to the log file instead.
    subprocess.run(  # noqa: S603 - fixed binary from the pgserver wheel, no shell
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-l", str(pgdata / "log"),
         "-w", *args],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=user,
        timeout=60,
    )


def _tune_once(server: object, directory: Path) -> None:
    if (directory / TUNED_MARKER).exists():
        return
    import psycopg

    info = server.get_postmaster_info()  # type: ignore[attr-defined]
    with psycopg.connect(
        host=str(info.socket_dir), port=info.port, user="postgres", dbname="postgres",
        autocommit=True,
    ) as conn:
        for name, value in TUNING.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # static keys/values above
    _pg_ctl(server, "-m", "fast", "restart")
    (directory / TUNED_MARKER).write_text("tuned\n")


def _ensure_database(server: EmbeddedServer, name: str) -> None:
    import psycopg
    from psycopg import errors, sql

    with psycopg.connect(server.conninfo("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _import_pgserver() -> None:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp, which
        # is where pgserver keeps its own lock file; that fallback is fine here.
        warnings.simplefilter("ignore")
        import pgserver  # noqa: F401
    _harden_handle_list()


def _harden_handle_list() -> None:
    """pgserver lists the processes using a data folder in ``.handle_pids.json``, which it
    rewrites in place (truncate, then write) at every start and exit, with no lock of its own
    on exit. A process killed in between — the fault tests SIGKILL workers; so does the OOM
    killer — or one reading while another writes sees an empty file, and from then on every
    process fails at start-up with a JSONDecodeError until someone deletes it (seen here).
    So the list is written atomically (a temporary file renamed over it) and an unreadable
    one reads as empty: it only tells pgserver when the last user of a server has gone,
    which ``cleanup_mode=None`` never acts on."""
    from pgserver import utils

    if getattr(utils.DiskList, "_atomic", False):
        return

    def get(self: Any) -> list[int]:
        try:
            values = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        return [value for value in values if isinstance(value, int)] if isinstance(values, list) else []

    def put(self: Any, values: list[int]) -> None:
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps(values))
        os.replace(temporary, self.path)

    utils.DiskList.get = get  # type: ignore[method-assign]  # the library's own methods, made safe
    utils.DiskList.put = put  # type: ignore[method-assign]
    utils.DiskList._atomic = True  # type: ignore[attr-defined]


def _get_server(directory: Path) -> object:
    _import_pgserver()
    import pgserver
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import PostmasterInfo

    # pgserver caches one handle per data folder and would hand back a stopped server's
    # handle without starting it again (after stop() in this process, or a crash).
    key = directory.expanduser().resolve()
    info = PostmasterInfo.read_from_pgdata(key)
    if key in PostgresServer._instances and (info is None or not info.is_running()):
        del PostgresServer._instances[key]
    return pgserver.get_server(directory, cleanup_mode=None)


# The data folders whose server this process started (not found running): sb_up stops those.
_started: set[Path] = set()


def started_here(directory: Path | None = None) -> bool:
    """Whether this process started the server of ``directory`` (it was not running before)."""
    return (directory or data_dir()) in _started


def running(directory: Path | None = None) -> EmbeddedServer | None:
    """How to reach the server of ``directory`` if it is running, else None: never starts it."""
    _import_pgserver()
    from pgserver.utils import PostmasterInfo

    directory = directory or data_dir()
    info = PostmasterInfo.read_from_pgdata(directory) if directory.exists() else None
    if info is None or not info.is_running() or info.socket_dir is None:
        return None
    return EmbeddedServer(directory, info.socket_dir, info.port or 5432)


def unstarted_settings(directory: Path | None = None) -> dict[str, object]:
    """``DATABASES`` settings for a process that must not start the server (``sb_db``): the
    running server's, or where it would be (nothing connects to it)."""
    directory = directory or data_dir()
    return (running(directory) or EmbeddedServer(directory, directory, 5432)).settings()


def ensure_running(directory: Path | None = None) -> EmbeddedServer:
    """Start the embedded server if it is not running, and return how to reach it."""
    _import_pgserver()
    from pgserver.utils import PostmasterInfo

    directory = directory or data_dir()
    with _project_lock(directory):
        directory.mkdir(exist_ok=True)
        before = PostmasterInfo.read_from_pgdata(directory)
        if before is None or not before.is_running():
            _started.add(directory)
        server = _get_server(directory)
        _tune_once(server, directory)
        info = PostmasterInfo.read_from_pgdata(directory)
        if info is None or not info.is_running() or info.socket_dir is None:
            raise RuntimeError(f"embedded PostgreSQL in {directory} did not start; see {directory}/log")
        embedded = EmbeddedServer(directory, info.socket_dir, info.port or 5432)
        _ensure_database(embedded, DATABASE_NAME)
        return embedded


def stop(directory: Path | None = None) -> bool:
    """Stop the embedded server; returns False when it was not running."""
    _import_pgserver()
    from pgserver.utils import PostmasterInfo

    directory = directory or data_dir()
    with _project_lock(directory):
        info = PostmasterInfo.read_from_pgdata(directory)
        if info is None or not info.is_running():
            return False
        server = _get_server(directory)
        _pg_ctl(server, "-m", "fast", "stop")
        return True


def restart(directory: Path | None = None) -> None:
    """Restart the running server (fast shutdown), as a fault-injection and ops helper."""
    directory = directory or data_dir()
    with _project_lock(directory):
        server = _get_server(directory)
        _pg_ctl(server, "-m", "fast", "restart")
