"""What the tests share, in one place (a test module defines no copy of anything here):

- ``factories``: factory-boy factories and workspaces, users, members and API tokens;
- ``helpers``: workflow documents, publishing and starting, running the engine in-process,
  claims and leases, and reading back executions and steps;
- ``clients``: logged-in browser-session and token clients, and checks of their responses;
- ``claims``: system actors, signed claims, system workflows and the audit log;
- ``admin``: the Django admin's forms as staff users see them;
- ``handlers``: test-only TASK handlers (registered by ``tests/conftest.py``);
- ``httpserver``: a local destination that records its requests;
- ``cluster``: real ``manage.py`` subprocesses (qcluster, chaos, bench) and polling;
- ``browser``: Debian's chromium through Playwright (a pytest plugin).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
