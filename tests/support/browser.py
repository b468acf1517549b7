"""Browser fixtures: Debian's chromium driven by Playwright against pytest-django's live
server (real HTTP, real static files, the test database).

Test modules load these with ``pytest_plugins = ["tests.support.browser"]`` (and import
nothing else from here: the plugin must be imported by pytest first). Screenshots go to
``artifacts/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import Page, expect, sync_playwright

from tests.support import ARTIFACTS
from tests.support.factories import default_workspace, member
from workflows.models import Role

SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PASSWORD = "operator-password-for-tests"


@pytest.fixture
def page(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    """A fresh browser page whose relative URLs go to the live server."""
    # Playwright's sync API runs an asyncio event loop in the test's thread, so Django thinks
    # the test body is async code and refuses its (synchronous, ordinary) ORM calls with
    # SynchronousOnlyOperation. Nothing here runs concurrently on those connections.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make system-deps` (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=live_server.url, viewport={"width": 1360, "height": 900})
        context.set_default_timeout(15_000)
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()
            # Inside Playwright's loop the test body got its own database connections (Django
            # keeps them per async context); closed here, or the test database cannot be dropped.
            connections.close_all()


@pytest.fixture
def operator(transactional_db: Any) -> Any:
    """An operator of the default workspace (the role that may retry, cancel and edit limits)."""
    return member(default_workspace(), Role.OPERATOR, "oper", password=PASSWORD)


class Operator:
    """What a test does through the browser besides clicking: log in, take screenshots,
    and prove that the page was never reloaded."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def log_in(self, user: Any, *, next_path: str = "/executions/") -> None:
        """Log in through the login form, as an operator would."""
        self.page.goto(f"/accounts/login/?next={next_path}")
        self.page.get_by_label("Username").fill(user.get_username())
        self.page.get_by_label("Password").fill(PASSWORD)
        self.page.get_by_role("button", name="Log in").click()
        expect(self.page.locator(".who")).to_contain_text(user.get_username())

    def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def mark_page(self) -> None:
        """Tag the loaded document; ``still_same_page`` proves no reload happened since."""
        self.page.evaluate("window.__sbPageMark = 'unchanged'")

    def still_same_page(self) -> bool:
        return bool(self.page.evaluate("window.__sbPageMark === 'unchanged'"))


@pytest.fixture
def ui(page: Page) -> Operator:
    return Operator(page)


# --- a destination that holds calls until the test lets them go ---------------------------------

@dataclass
class Gate:
    """A local HTTP server whose answers wait for ``open()``: calls stay in flight, so the
    Rate Limits page's in-flight count can be watched deterministically."""

    url: str
    opened: threading.Event
    lock: threading.Lock
    in_flight: int = 0
    peak: int = 0
    served: int = 0

    def open(self) -> None:
        self.opened.set()


def _gate_handler(gate: Gate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            with gate.lock:
                gate.in_flight += 1
                gate.peak = max(gate.peak, gate.in_flight)
            gate.opened.wait(timeout=90)
            with gate.lock:
                gate.in_flight -= 1
                gate.served += 1
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def gate() -> Iterator[Gate]:
    state = Gate(url="", opened=threading.Event(), lock=threading.Lock())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _gate_handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.open()
        server.shutdown()
        server.server_close()
