# SchemaBridge — the two commands: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
# Outbound HTTP reaches public addresses only; the demo, tests and benchmarks call loopback.
LOOPBACK := 127.0.0.0/8,::1
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run dev test install system-deps lint bench chaos stop-db clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP) .env

# A local SECRET_KEY for manage.py commands run outside `make run` (which turns DEBUG on),
# and a Fernet key that seals destination credentials (SB_CREDENTIALS_KEY).
.env:
	@printf '# Local settings for manage.py (git-ignored). Real environment variables win.\nSECRET_KEY=%s\nSB_CREDENTIALS_KEY=%s\n' \
		"$$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')" \
		"$$(python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')" > .env
	@chmod 600 .env

# Debian's chromium drives the browser tests (Playwright never downloads a browser here).
# curl runs the README's API walkthrough (docs/examples/api-tour.sh) in the suite.
# iproute2 (`ip netns`) builds the worker hosts of `bench cluster` (tests/fault/test_cluster_bench.py).
system-deps:
	@if [ ! -x /usr/bin/chromium ] || ! command -v curl >/dev/null || ! command -v ip >/dev/null; then \
		echo "Installing Debian's chromium, curl and iproute2 for the browser, API-tour and cluster tests..."; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium curl iproute2 >/dev/null; \
	fi

# The main job: embedded PostgreSQL, migrations, an admin login, demo workflows, the web
# app (gunicorn + WhiteNoise, DEBUG off) and a qcluster, all in the foreground (Ctrl-C stops
# them). SB_DEMO=1 loads the demo (handlers, ledger, workflows); production settings never do.
# It serves plain http on 127.0.0.1, so the HTTPS-only defaults of DEBUG off are turned off
# here (docs/security.md); the SECRET_KEY comes from .env. ARGS passes options to sb_up,
# e.g. `make run ARGS="--port 8080 --demo hello"`.
LOCAL_HTTP := SB_SSL_REDIRECT=0 SB_SECURE_COOKIES=0 SB_HSTS_SECONDS=0
run: install
	SB_DEMO=1 DEBUG=0 $(LOCAL_HTTP) SB_OUTBOUND_ALLOW=$(LOOPBACK) $(BIN)/python manage.py sb_up $(ARGS)

# Development: the same, served by Django's runserver with auto-reload and DEBUG on.
dev: install
	SB_DEMO=1 DEBUG=1 $(LOCAL_HTTP) SB_OUTBOUND_ALLOW=$(LOOPBACK) $(BIN)/python manage.py sb_up --dev $(ARGS)

# The whole suite on the embedded PostgreSQL (or DATABASE_URL), browser tests included.
# The test settings turn SB_DEMO on too, so a plain `pytest` is the same run.
# Two runs: the unit and integration tests on two pytest-xdist workers (each its own test
# database; they only compete for CPU), then the end-to-end and fault tests one at a time (they
# start clusters, browsers and database restarts that must not share the machine's timing).
# Both always run; the target fails if either did.
TEST_ENV := SB_DEMO=1 SB_OUTBOUND_ALLOW=$(LOOPBACK)
test: install system-deps
	@$(TEST_ENV) $(BIN)/python -m pytest -n 2 --durations=15 tests/unit tests/integration; first=$$?; \
	$(TEST_ENV) $(BIN)/python -m pytest --durations=15 tests/e2e tests/fault; second=$$?; \
	echo "unit + integration: exit $$first; e2e + fault: exit $$second"; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]

lint: install
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	SB_DEMO=1 $(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/mypy .

bench: install
	SB_DEMO=1 SB_OUTBOUND_ALLOW=$(LOOPBACK) $(BIN)/python manage.py bench fanout --items 10000 --workers 2

chaos: install
	SB_DEMO=1 SB_OUTBOUND_ALLOW=$(LOOPBACK) $(BIN)/python manage.py chaos all --items 5000

stop-db: install
	$(BIN)/python manage.py sb_db stop

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache artifacts
