"""Settings for the test suite: the real settings with a throwaway secret key and the demo
(``SB_DEMO=1``) installed."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-never-used-in-production")
# The suite uses the demo handlers and ledger; set in the environment (not only here) so the
# qcluster subprocesses of end-to-end tests load them too.
os.environ.setdefault("SB_DEMO", "1")
# Test servers listen on loopback; set in the environment so qcluster subprocesses inherit it.
os.environ.setdefault("SB_OUTBOUND_ALLOW", "127.0.0.0/8,::1")
os.environ.setdefault("SB_CREDENTIALS_KEY", "7Ge_yyrEaAzQdDi1e8Yu6I9FHp9oC1DfbZ5cDAn4JOg=")  # a test-only Fernet key

from schemabridge_site.settings import *  # noqa: F403

# Django's test client sends Host: testserver; only the suite accepts it.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]  # noqa: F405
# The suite (test client, live server, browser) speaks plain http.
SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0

# The suite must never wait on a lease from a killed test worker for long.
SB["LEASE_SECONDS"] = float(os.environ.get("SB_LEASE_SECONDS", "30"))  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests only
# No collectstatic before a test run: templates name the static files as they are.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
# WhiteNoise warns (an error under -W error) when STATIC_ROOT is missing, as it is in a fresh
# checkout where collectstatic never ran; the suite serves static files from the finders.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
