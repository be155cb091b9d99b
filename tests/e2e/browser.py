"""A real browser for the end-to-end tests: Debian's Chromium driven by Playwright, and a loopback callback.

Playwright never downloads a browser here: it starts the system's `chromium` (MCP_TEST_CHROMIUM, default
/usr/bin/chromium). Without it the browser tests skip saying so, and fail instead under
MCP_E2E_REQUIRE_SERVICES=1 (what .ci/run sets, after installing the package). Every page a test shows a
person is screenshotted into test-artifacts/screenshots/<test>/ (not committed), to be looked at.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright._impl._driver import compute_driver_executable, get_driver_env
from playwright.async_api import Browser, Page, Request, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("MCP_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("MCP_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "screenshots"
# One navigation or click; a hung page fails the test instead of the suite.
PAGE_MS = 20_000
# This machine has no outside network: keep Chromium from trying (and from waiting on) Google's hosts.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def require_browser() -> None:
    """Skip when no browser can run here; fail instead under MCP_E2E_REQUIRE_SERVICES=1 (CI installs one)."""
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return
    message = f"needs Chromium at {CHROMIUM} (apt-get install chromium, or set MCP_TEST_CHROMIUM)"
    if os.environ.get("MCP_E2E_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (MCP_E2E_REQUIRE_SERVICES=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(message)


class _BrowserServer:
    """One Chromium per test process, served by Playwright's own `launch-server` (its driver, the same
    Node.js program every Playwright client runs): each test connects to it over Playwright's protocol
    and works in contexts of its own (fresh cookies and storage), instead of starting a browser of its
    own. A browser start cost about a second of CPU on the loaded CI machine, sixty times over."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.endpoint = ""
        self.lock = threading.Lock()

    def url(self) -> str:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.endpoint = self._start()
                atexit.register(self.stop)
            return self.endpoint

    def _start(self) -> str:
        node, cli = compute_driver_executable()
        config = Path(tempfile.mkstemp(prefix="e2e-chromium-", suffix=".json")[1])
        config.write_text(json.dumps({"executablePath": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS}))
        self.proc = subprocess.Popen(
            [node, cli, "launch-server", "--browser", "chromium", "--config", str(config)],
            env=get_driver_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(PAGE_MS / 1000)
        endpoint = lines[0].strip() if lines else ""
        if not endpoint.startswith("ws://"):
            self.stop()
            raise RuntimeError(f"Playwright's launch-server did not start Chromium: {endpoint!r}")
        return endpoint

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the server closes its browser on SIGTERM
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


_SERVER = _BrowserServer()

# `settled`: a page's own requests answered, then this long without a new one. Playwright's "networkidle"
# waits 500 ms without traffic on every page (the browser sweep opens 37: 19 s of its 52 s were that).
QUIET_MS = 100
SETTLE_MS = 3_000  # a page whose requests never settle (a poll) is taken as it is then
_IN_FLIGHT: weakref.WeakKeyDictionary[Page, set[Request]] = weakref.WeakKeyDictionary()


def track_requests(page: Page) -> None:
    """Count `page`'s requests in flight from now on, for `settled`: a request is answered when its
    response's headers arrive (a stream kept open answers once) or when it fails."""
    if page in _IN_FLIGHT:
        return
    flying: set[Request] = set()
    _IN_FLIGHT[page] = flying
    # Lambdas: Playwright marks each handler, which a bound method of a set cannot carry.
    page.on("request", lambda request: flying.add(request))
    page.on("response", lambda response: flying.discard(response.request))
    page.on("requestfailed", lambda request: flying.discard(request))


async def settled(page: Page) -> None:
    """Loaded, and the requests its scripts made since answered, with none new for QUIET_MS (at most
    SETTLE_MS in all). A page `track_requests` does not watch waits for Playwright's "networkidle"."""
    await page.wait_for_load_state("load")
    flying = _IN_FLIGHT.get(page)
    if flying is None:
        with contextlib.suppress(PlaywrightTimeout):
            await page.wait_for_load_state("networkidle", timeout=SETTLE_MS)
        return
    deadline = time.monotonic() + SETTLE_MS / 1000
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if flying:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET_MS / 1000:
            return
        await asyncio.sleep(0.02)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """The test process's headless Chromium (the system's), connected for this test: what the test
    opens in it is closed when it ends (a connected browser's close closes this client's contexts)."""
    require_browser()
    endpoint = await asyncio.to_thread(_SERVER.url)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect(endpoint)
        try:
            yield browser
        finally:
            await browser.close()


class Screenshots:
    """Numbered full-page screenshots of one test, in test-artifacts/screenshots/<test name>/."""

    def __init__(self, test_name: str) -> None:
        self.folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)[:120]
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.taken: list[Path] = []

    async def take(self, page: Page, name: str) -> Path:
        path = self.folder / f"{len(self.taken) + 1:02d}-{name}.png"
        for attempt in range(3):
            try:
                await page.screenshot(path=str(path), full_page=True)
                break
            except PlaywrightError as exc:
                # Headless Chromium on a loaded machine (CI's three workers beside its own renderer) has
                # answered "Unable to capture screenshot" for a page that was already shown: a frame not
                # ready yet, gone a moment later.
                if "Unable to capture screenshot" not in str(exc) or attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        self.taken.append(path)
        return path


@dataclass
class Callback:
    """A native app's loopback listener: records the redirect back from the authorization server."""

    url: str
    received: list[dict[str, str]] = field(default_factory=list)
    _arrived: threading.Event = field(default_factory=threading.Event, repr=False)

    def record(self, query: str) -> None:
        self.received.append({key: values[0] for key, values in parse_qs(query).items()})
        self._arrived.set()

    async def next(self, timeout: float = PAGE_MS / 1000) -> dict[str, str]:
        """The parameters of the next redirect that reached the listener."""
        arrived = await asyncio.to_thread(self._arrived.wait, timeout)
        assert arrived, f"no redirect reached {self.url} within {timeout:.0f} s"
        self._arrived.clear()
        return self.received[-1]


@asynccontextmanager
async def loopback_callback() -> AsyncIterator[Callback]:
    """An HTTP listener on a free 127.0.0.1 port whose /callback answers the page a native app shows."""
    holder: list[Callback] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            parts = urlsplit(self.path)
            if parts.path != "/callback":
                self.send_error(404)
                return
            holder[0].record(parts.query)
            body = b"<!doctype html><title>Connected</title><p>You can close this window.</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the output clean
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    holder.append(Callback(url=f"http://127.0.0.1:{httpd.server_address[1]}/callback"))
    thread = threading.Thread(target=httpd.serve_forever, name="e2e-oauth-callback", daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


async def sign_in(page: Page, username: str, password: str) -> None:
    """Fill the authorization server's (or the admin's) sign-in form and submit it as a person would."""
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password)
    async with page.expect_navigation(timeout=PAGE_MS):
        await page.click("button[type=submit], input[type=submit]")


def forbidden_by_csrf(text: str) -> bool:
    """Django's own CSRF page (what a person saw before issue 8), as opposed to ours."""
    return "CSRF verification failed" in text
