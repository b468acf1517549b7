"""Django settings, read from the environment (and a git-ignored ``.env``, see load_dotenv).

DATABASE_URL  PostgreSQL URL. Unset: the embedded server in ``.pgdata/`` is started.
SECRET_KEY    required unless DEBUG is on.
DEBUG         "1"/"true" to enable debug mode (off by default).
ALLOWED_HOSTS comma-separated host names (default: localhost names).
REDIS_URL     use Redis as django-q2's broker instead of the database.
SB_DEMO       "1" installs the demo and fault injection (the ``demo`` app: demo.* handlers,
              the demo ledger at /demo/) and the benchmarks (the ``bench`` app: ``bench``,
              ``bench_ui``, ``chaos``). ``make run``, the tests, ``make bench`` and
              ``make chaos`` set it; a production deployment never does.
SB_SSL_REDIRECT, SB_SECURE_COOKIES, SB_HSTS_SECONDS, SB_HSTS_INCLUDE_SUBDOMAINS, SB_HSTS_PRELOAD,
SB_PROXY_SSL_HEADER   HTTPS hardening: on by default when DEBUG is off (docs/security.md).
SB_HANDLER_MODULES    comma-separated dotted modules of TASK handlers, imported at start-up by
              every process (web, workers, commands), as is each installed app's ``sb_handlers``
              module (docs/dsl.md, "Handler packages").
SB_METRICS_TOKEN      the bearer token that opens /metrics (unset: /metrics answers 404).
PROMETHEUS_MULTIPROC_DIR  where each process writes its metrics (``sb_up`` sets it; docs/operations.md).
LOG_FORMAT            "json": one JSON object per log line (docs/operations.md); else plain text.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from schemabridge_site.logging import formatter_config

BASE_DIR = Path(__file__).resolve().parent.parent


def load_dotenv(path: Path) -> None:
    """``KEY=VALUE`` lines of a project-local ``.env`` (``make install`` writes one with a
    generated SECRET_KEY) fill in what the environment does not set; real environment
    variables always win."""
    if not path.is_file():
        return
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            os.environ.setdefault(key.strip(), value.strip())


load_dotenv(BASE_DIR / ".env")


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def derived_deployment_id(secret_key: str) -> str:
    """A stable, non-secret id for this deployment when SB_DEPLOYMENT_ID is not set: an HMAC
    of a fixed label under SECRET_KEY (reveals nothing about the key)."""
    return "sb-" + hmac.new(secret_key.encode(), b"schemabridge deployment id", hashlib.sha256).hexdigest()[:16]


DEBUG = env_bool("DEBUG")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "insecure-local-development-key-only-used-with-DEBUG-on"  # noqa: S105

ALLOWED_HOSTS = [
    host.strip() for host in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if host.strip()
]
CSRF_TRUSTED_ORIGINS = [
    origin.strip() for origin in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if origin.strip()
]

# --- HTTPS (docs/security.md, "Deploying") ------------------------------------------------
# Secure by default whenever DEBUG is off (`manage.py check --deploy` reports nothing);
# `make run` turns DEBUG on, so plain http on localhost keeps working. Each can be set alone.
_SECURE = not DEBUG
SECURE_SSL_REDIRECT = env_bool("SB_SSL_REDIRECT", _SECURE)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SB_SECURE_COOKIES", _SECURE)
SECURE_HSTS_SECONDS = env_int("SB_HSTS_SECONDS", 31_536_000 if _SECURE else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SB_HSTS_INCLUDE_SUBDOMAINS", _SECURE)
SECURE_HSTS_PRELOAD = env_bool("SB_HSTS_PRELOAD", _SECURE)
# Load balancers and orchestrators probe the process itself, over plain http.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# Behind a TLS-terminating proxy: the header it sets for https requests, e.g.
# SB_PROXY_SSL_HEADER=X-Forwarded-Proto (only if the proxy always sets or strips it).
if os.environ.get("SB_PROXY_SSL_HEADER", "").strip():
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + os.environ["SB_PROXY_SSL_HEADER"].strip().upper().replace("-", "_"),
                               "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "django_htmx",
    "workflows",
    "executions",
    "schemabridge_site",  # the site's own commands (sb_db: the embedded PostgreSQL)
]

# Demo, fault injection and benchmarks are attack surface (a handler that SIGKILLs its worker,
# an anonymous write endpoint): loaded only when asked for.
DEMO = env_bool("SB_DEMO")
if DEMO:
    INSTALLED_APPS += ["demo", "bench"]

# TASK handler packages (docs/dsl.md): imported at start-up by workflows.apps; one that fails
# to import stops the process with its name.
SB_HANDLER_MODULES = [
    module.strip() for module in os.environ.get("SB_HANDLER_MODULES", "").split(",") if module.strip()
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "schemabridge_site.middleware.RefuseChunkedBodies",  # a 411, never a body read as empty
    # Static files straight from the web process, compressed and cached (docs/operations.md).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "schemabridge_site.urls"
WSGI_APPLICATION = "schemabridge_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        config: dict[str, Any] = dict(dj_database_url.parse(url))
    else:
        from schemabridge_site import embedded_db

        # ``manage.py sb_db`` reports, stops and starts the server itself: reading the settings
        # must not start it (``sb_db status`` on a stopped server says so and leaves it stopped).
        sb_db = len(sys.argv) > 1 and Path(sys.argv[0]).name == "manage.py" and sys.argv[1] == "sb_db"
        config = embedded_db.unstarted_settings() if sb_db else embedded_db.ensure_running().settings()
    if os.environ.get("SB_DB_NAME", "").strip():
        # Lets a subprocess (a test's qcluster, a benchmark) use another database on the same server.
        config["NAME"] = os.environ["SB_DB_NAME"].strip()
    if os.environ.get("SB_TEST_DB_NAME", "").strip():
        # Lets two test runs share one server without sharing a test database.
        config["TEST"] = {"NAME": os.environ["SB_TEST_DB_NAME"].strip()}
    config["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60)
    config["CONN_HEALTH_CHECKS"] = True
    # Connections must fail fast when the server is gone, so workers reconnect instead of
    # hanging on a dead socket.
    config["OPTIONS"] = {**dict(config.get("OPTIONS") or {}), "connect_timeout": 10, **database_binding()}
    return config


def database_binding() -> dict[str, Any]:
    """How statements reach PostgreSQL (psycopg options in Django's ``OPTIONS``).

    Parameters are bound on the server: they travel apart from the SQL, and lists as binary
    arrays (psycopg's dumper, executions/apps.py), instead of being quoted into its text in
    Python — the engine moves rows in sets of hundreds, one array per column.
    ``SB_DB_PREPARE_THRESHOLD`` (2 by default; ``off``): a statement run that many times on a
    connection is prepared, so PostgreSQL parses and plans the engine's few statements once
    per connection instead of on every claim and commit. Turn it off behind a pooler that
    does not keep prepared statements (PgBouncer before 1.21 in transaction mode, or without
    ``max_prepared_statements``); it only works with server-side binding.
    docs/performance-log.md, "Seventh pass"."""
    threshold = os.environ.get("SB_DB_PREPARE_THRESHOLD", "").strip().lower()
    if threshold in ("off", "none"):
        return {"server_side_binding": True}
    try:
        prepare = int(threshold) if threshold else 2
    except ValueError:
        prepare = -1
    if prepare < 0:
        raise ImproperlyConfigured(f"SB_DB_PREPARE_THRESHOLD must be a whole number of 0 or more, or 'off' "
                                   f"(not {threshold!r})")
    return {"server_side_binding": True, "prepare_threshold": prepare}


DATABASES = {"default": _database()}


def _embedded() -> dict[str, Any] | None:
    if os.environ.get("DATABASE_URL", "").strip():
        return None
    from schemabridge_site import embedded_db

    return {"data_dir": str(embedded_db.data_dir()), "started_here": embedded_db.started_here()}


# The embedded PostgreSQL this process uses (None with DATABASE_URL), and whether starting this
# process started it: ``sb_up`` stops such a server again on Ctrl-C.
SB_EMBEDDED_DB = _embedded()

# A cache shared by every process on the database: django-q2 publishes its clusters' status
# there (qinfo/qmonitor see every worker host), and drains read it to notice that their
# cluster is stopping (executions/worker/housekeeping.py). The table is created by a migration.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "sb_cache",
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("SB_STATIC_ROOT", "").strip() or BASE_DIR / "static_collected")
STATICFILES_DIRS = [BASE_DIR / "static"]
# `manage.py collectstatic` (sb_up runs it) writes hashed, compressed copies that WhiteNoise
# serves with far-future cache headers.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# A file missing from the manifest is linked unhashed (a 404 for that file), not a 500 page.
WHITENOISE_MANIFEST_STRICT = False

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "ui:execution-list"
LOGOUT_REDIRECT_URL = "login"

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("SB_MAX_BODY_BYTES", 32 * 1024 * 1024)

# --- REST API ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "executions.api.auth.TokenAuthentication",
        "executions.api.auth.SessionAuthentication",
    ],
    # request.user is a workspace Principal; writes check their role in their audit block.
    "DEFAULT_PERMISSION_CLASSES": ["executions.api.auth.HasPrincipal"],
    "DEFAULT_PARSER_CLASSES": ["executions.api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "executions.api.errors.problem_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "SchemaBridge API",
    "DESCRIPTION": "Publish workflow versions, start executions idempotently, follow fan-outs, retry and cancel. "
    "Authenticate with `Authorization: Token <secret>`; errors are RFC 9457 problems. See docs/api.md.",
    "VERSION": "1.0.0",
    # 3.1: JSON Schema 2020-12, so nullable types, exclusive bounds and recursive bodies are exact.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "PATH_CONVERTER_OVERRIDES": {"wfkey": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
                                 "vhash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                 "vertex": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_-]{0,63}$"},
                                 "destname": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
                                 "schedname": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
                                 "execid": {"type": "string", "format": "uuid"}},
    "ENUM_NAME_OVERRIDES": {
        "ExecutionStatusEnum": "executions.models.ExecutionStatus",
        "StepStatusEnum": "executions.models.StepStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "executions.api.schema.add_problem_responses",
        "executions.api.schema.add_components",
    ],
}

# --- django-q2: the worker runtime -------------------------------------------------------
# One task drains a batch of ready steps; see executions/worker/ (tasks.py, loop.py). The task timeout must be
# shorter than `retry` (checked by `manage.py check`), otherwise a task still running would
# be handed to a second worker.
Q_CLUSTER: dict[str, object] = {
    "name": "schemabridge",
    "workers": env_int("SB_WORKERS", 2),
    "timeout": env_int("SB_Q_TIMEOUT", 600),
    "retry": env_int("SB_Q_RETRY", 660),
    "max_attempts": 1,
    "ack_failures": True,
    "catch_up": False,
    "save_limit": -1,
    "queue_limit": 8,
    "recycle": 1000,
    "poll": 0.1,
    "label": "Django Q2",
}
if os.environ.get("REDIS_URL", "").strip():
    Q_CLUSTER["redis"] = os.environ["REDIS_URL"].strip()
else:
    Q_CLUSTER["orm"] = "default"

# --- SchemaBridge engine ----------------------------------------------------------------
SB: dict[str, Any] = {
    # Steps claimed per round trip by a worker.
    "CLAIM_BATCH": env_int("SB_CLAIM_BATCH", 256),
    # Threads per worker process running claimed steps (handlers are mostly I/O bound).
    "STEP_THREADS": env_int("SB_STEP_THREADS", 16),
    # Destination-bound steps (HTTP calls) one worker process runs at once on its event loop;
    # each destination's own limit bounds them too.
    "DESTINATION_IN_FLIGHT": env_int("SB_DESTINATION_IN_FLIGHT", 512),
    # How often a worker process's threads hand over the interpreter lock (seconds; 0 keeps
    # Python's 5 ms): the event loop waits for it on every call it starts or ends.
    "GIL_SWITCH_SECONDS": env_float("SB_GIL_SWITCH_SECONDS", 0.001),
    # Allocations between two young-generation collections in a worker process (Python: 700).
    "GC_YOUNG_THRESHOLD": env_int("SB_GC_YOUNG_THRESHOLD", 20_000),
    # Lease on a claimed step; renewed while the step runs. A dead worker's step is
    # re-claimed after this long.
    "LEASE_SECONDS": env_float("SB_LEASE_SECONDS", 30.0),
    # Priorities age (docs/architecture.md, "Scheduling"): ready work that has waited this long
    # counts as one priority level higher, per such interval, so low priorities still move.
    "PRIORITY_AGING_SECONDS": env_float("SB_PRIORITY_AGING_SECONDS", 60.0),
    # Children created per INSERT statement by a spawner (S3).
    "SPAWN_BATCH": env_int("SB_SPAWN_BATCH", 1000),
    # Children a bulk operation acts on per transaction (issue 31 §5, services/bulk.py).
    "BULK_BATCH": env_int("SB_BULK_BATCH", 500),
    # A spawner hands its step back (READY, due now, no attempt used) after spawning this
    # long, so a 1,000,000-item spawn never outlives its drain task; it resumes at the cursor.
    "SPAWN_SLICE_SECONDS": env_float("SB_SPAWN_SLICE_SECONDS", 60.0),
    # A MERGE over at most this many children stores every child's output in its own output
    # (``items``); over more, only the counts: readers page through the children's outputs.
    "MERGE_INLINE_ITEMS": env_int("SB_MERGE_INLINE_ITEMS", 10_000),
    # Drains alive at once across the whole deployment: one per live worker process (the
    # worker registry, executions/registry.py). SB_DRAIN_SLOTS, if set above 0, is a cap.
    "DRAIN_SLOTS": env_int("SB_DRAIN_SLOTS", 0),
    # Each worker process refreshes its registry row this often; a row not refreshed within
    # the TTL no longer counts (its host is gone) and the tick deletes it.
    "WORKER_HEARTBEAT_SECONDS": env_float("SB_WORKER_HEARTBEAT_SECONDS", 5.0),
    "WORKER_TTL_SECONDS": env_float("SB_WORKER_TTL_SECONDS", 30.0),
    # A drain hands over to a fresh task after this long (well under the q timeout).
    "DRAIN_MAX_SECONDS": env_float("SB_DRAIN_MAX_SECONDS", 120.0),
    # An idle drain with no due timers exits after this long.
    "DRAIN_IDLE_SECONDS": env_float("SB_DRAIN_IDLE_SECONDS", 5.0),
    # Payload store capacity and high-water mark (S7).
    "PAYLOAD_CAPACITY_BYTES": env_int("SB_PAYLOAD_CAPACITY_BYTES", 2 * 1024**3),
    "PAYLOAD_HIGH_WATER": env_float("SB_PAYLOAD_HIGH_WATER", 0.8),
    "PAYLOAD_DEFER_SECONDS": env_float("SB_PAYLOAD_DEFER_SECONDS", 30.0),
    # Data lifecycle (S19, executions/core/retention.py): payloads of SUCCEEDED trees are deleted
    # this long after their root finished; whole finished trees (any outcome) after
    # RETENTION_SECONDS. A pass works in batches of RETENTION_BATCH executions; the tick's
    # pass stops after RETENTION_TICK_SECONDS (the next one resumes).
    "PAYLOAD_RETENTION_SECONDS": env_float("SB_PAYLOAD_RETENTION_SECONDS", 7 * 24 * 3600),
    "RETENTION_SECONDS": env_float("SB_RETENTION_SECONDS", 30 * 24 * 3600),
    "RETENTION_BATCH": env_int("SB_RETENTION_BATCH", 2000),
    "RETENTION_TICK_SECONDS": env_float("SB_RETENTION_TICK_SECONDS", 20.0),
    # Destination call-log rows (the Rate Limits page's figures read the last five minutes).
    "CALL_LOG_RETENTION_SECONDS": env_float("SB_CALL_LOG_RETENTION_SECONDS", 7 * 24 * 3600),
    # This deployment's name in system actors' signed claims (S15): a claim signed for another
    # deployment is refused. Default: derived from SECRET_KEY (so distinct per deployment);
    # set it explicitly in production so that rotating SECRET_KEY does not change it.
    "DEPLOYMENT_ID": os.environ.get("SB_DEPLOYMENT_ID", "").strip() or derived_deployment_id(SECRET_KEY),
    # Failed logins (per IP and per username) and failed API token authentications (per IP)
    # allowed per window; then the login form refuses and the API answers 429.
    "AUTH_FAILURES_LIMIT": env_int("SB_AUTH_FAILURES_LIMIT", 10),
    "AUTH_FAILURE_WINDOW_SECONDS": env_int("SB_AUTH_FAILURE_WINDOW_SECONDS", 300),
    # Refused system-actor claims allowed per credential (token) per minute; then 429.
    "CLAIM_REFUSALS_PER_MINUTE": env_int("SB_CLAIM_REFUSALS_PER_MINUTE", 10),
    # Largest API request bodies, checked from Content-Length before reading and again while
    # reading (a 413 problem): starts, publishes, and every other write (or a claim's body).
    "MAX_START_BYTES": env_int("SB_MAX_START_BYTES", 8 * 1024 * 1024),
    "MAX_PUBLISH_BYTES": env_int("SB_MAX_PUBLISH_BYTES", 1024 * 1024),
    "MAX_WRITE_BYTES": env_int("SB_MAX_WRITE_BYTES", 1024 * 1024),
    # Waiting for the outside world (S27): the largest callback body (POST /api/v1/callbacks/…,
    # anonymous: the token is the credential), how long posted events are kept (for a WAIT's
    # lookbackSeconds and idempotent ids), and the address callbacks are sent to ($.callback.url).
    "CALLBACK_MAX_BYTES": env_int("SB_CALLBACK_MAX_BYTES", 1024 * 1024),
    "EVENT_RETENTION_SECONDS": env_float("SB_EVENT_RETENTION_SECONDS", 3600),
    "PUBLIC_URL": os.environ.get("SB_PUBLIC_URL", "http://127.0.0.1:8000").strip().rstrip("/"),
    # Largest upload (POST /api/v1/uploads, streamed: never held in memory whole), and how long
    # an upload is kept after its creation or last use by a start (executions/services/uploads.py).
    "UPLOAD_MAX_BYTES": env_int("SB_UPLOAD_MAX_BYTES", 1024**3),
    "UPLOAD_MAX_LINE_BYTES": env_int("SB_UPLOAD_MAX_LINE_BYTES", 1024**2),  # one item (a JSON line, a CSV record)
    "UPLOAD_MAX_COLUMNS": env_int("SB_UPLOAD_MAX_COLUMNS", 1000),  # a CSV header's
    "UPLOAD_RETENTION_SECONDS": env_float("SB_UPLOAD_RETENTION_SECONDS", 24 * 3600),
    # Outbound HTTP reaches public addresses only; this opens chosen networks and hosts
    # (comma-separated CIDRs and host names, e.g. "127.0.0.0/8,::1"). See executions/destinations/outbound.py.
    "OUTBOUND_ALLOW": os.environ.get("SB_OUTBOUND_ALLOW", ""),
    # Fernet keys (comma-separated; the first seals) for destination credentials at rest.
    # Unset: credentials cannot be stored. See executions/destinations/credentials.py.
    "CREDENTIALS_KEY": os.environ.get("SB_CREDENTIALS_KEY", ""),
    # The bearer token that opens /metrics; unset or empty: /metrics does not exist (404).
    "METRICS_TOKEN": os.environ.get("SB_METRICS_TOKEN", "").strip(),
    # Reserved workflow keys (S15): only verified system actors may publish/start them.
    "RESERVED_KEY_PATTERNS": [
        p.strip() for p in os.environ.get("SB_RESERVED_KEY_PATTERNS", "system.*").split(",") if p.strip()
    ],
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    # LOG_FORMAT=json: one JSON object per line, with execution, step and workspace where known.
    "formatters": {"default": formatter_config(os.environ.get("LOG_FORMAT", ""))},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "default"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # django-q2 logs every task at INFO; a drain is a task, so that is noise by default.
        "django-q": {"level": os.environ.get("SB_Q_LOG_LEVEL", "WARNING")},
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "INFO"},
    },
}
if DEMO:
    # The demo ledger refuses some entries with 503 on purpose; that is not a server error.
    LOGGING["filters"] = {"not_demo_ledger": {"()": "demo.logfilters.NotDemoLedger"}}
    for name in ("django.request", "django.server"):
        LOGGING["loggers"][name]["filters"] = ["not_demo_ledger"]
