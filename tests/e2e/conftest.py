"""End-to-end harness: real Daphne processes on 127.0.0.1 against their own seeded database.

The fixtures are package-scoped: the servers start once for tests/e2e and stop when it is done.
First `migrate`, `collectstatic` and `seed_demo` run as subprocesses (what `bin/serve` does)
against a fresh database: PostgreSQL `mcp_e2e_<random>` when DATABASE_URL points at PostgreSQL
(dropped at the end), a temporary SQLite file otherwise. REDIS_URL is passed through, so with
Redis the processes share the channel layer. Server output is attached to failing reports.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import trustme
from psycopg import sql

from tests.e2e import oauth_flow
from tests.e2e.helpers import Upstream
from tests.e2e.oauth_flow import DocumentServer

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "manage.py"
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = f"e2e-{secrets.token_urlsafe(12)}"
STARTUP_SECONDS = 45.0
COMMAND_SECONDS = 180.0

# The processes running now (Daphne, Celery), for the failure report.
_SERVERS: list[ServerProcess] = []
_LOG_OFFSETS = pytest.StashKey[dict[str, int]]()


def require_services(reason: str) -> None:
    """Skip a test that needs Redis when REDIS_URL is unset; fail it instead under MCP_E2E_REQUIRE_SERVICES=1."""
    if os.environ.get("REDIS_URL"):
        return
    message = f"needs REDIS_URL: {reason}"
    if os.environ.get("MCP_E2E_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (MCP_E2E_REQUIRE_SERVICES=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(message)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Runs before fixtures, so a test marked `services` never starts servers it cannot use.
    marker = item.get_closest_marker("services")
    if marker is not None:
        require_services(marker.kwargs.get("reason") or (marker.args[0] if marker.args else "real services"))
    item.stash[_LOG_OFFSETS] = {server.name: server.log_size() for server in _SERVERS}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.failed:
        offsets = item.stash.get(_LOG_OFFSETS, {})
        for server in _SERVERS:
            text = server.read_log(offsets.get(server.name, 0))
            if text.strip():
                report.sections.append((f"{server.name} output during this test", text[-20000:]))
    return report


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str, timeout: float = COMMAND_SECONDS) -> str:
    """Run `manage.py <args>` in a subprocess against the e2e database and return its stdout."""
    proc = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"manage.py {' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def django_shell(env: dict[str, str], code: str) -> str:
    """Run Python code in `manage.py shell` (another process than any server) and return its stdout."""
    return manage(env, "shell", "-c", code)


@dataclass
class ServerProcess:
    """A process the tests started (Daphne, a Celery worker), with its output in a log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def read_log(self, offset: int = 0) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self in _SERVERS:
            _SERVERS.remove(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class DaphneServer(ServerProcess):
    port: int = 0
    env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mcp_url(self, slug: str = "demo") -> str:
        return f"{self.url}/t/{slug}/mcp"


def start_celery_worker(name: str, env: dict[str, str], log_dir: Path) -> ServerProcess:
    """Start a Celery worker (what runs background tools) and return once it is ready."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "mcpsite", "worker",
                "--loglevel=INFO", "--concurrency=2", "--hostname", f"{name}@%h",
                # Alone on its own queue: no need to look for, or gossip with, other workers.
                "--without-gossip", "--without-mingle",
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    worker = ServerProcess(name=name, proc=proc, log_path=log_path)
    _SERVERS.append(worker)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            worker.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode} at startup:\n{worker.read_log()}")
        if " ready." in worker.read_log():
            return worker
        time.sleep(0.1)
    worker.stop()
    raise RuntimeError(f"{name} was not ready within {STARTUP_SECONDS:.0f} s:\n{worker.read_log()}")


def start_daphne(name: str, env: dict[str, str], log_dir: Path) -> DaphneServer:
    """Start Daphne on a free port and return once it serves the admin login page."""
    port = free_port()
    server_env = {**env, "MCP_PUBLIC_URL": f"http://127.0.0.1:{port}"}
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "mcpsite.asgi:application"],
            cwd=ROOT,
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = DaphneServer(name=name, proc=proc, log_path=log_path, port=port, env=server_env)
    _SERVERS.append(server)
    deadline = time.monotonic() + STARTUP_SECONDS
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode} at startup:\n{server.read_log()}")
        try:
            response = httpx.get(f"{server.url}/admin/login/", timeout=2)
            if response.status_code == 200:
                return server
            last_error = f"HTTP {response.status_code}"
        except httpx.TransportError as exc:
            last_error = repr(exc)
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(
        f"{name} did not serve /admin/login/ within {STARTUP_SECONDS:.0f} s ({last_error}):\n{server.read_log()}"
    )


# --- the fetch_json tool's upstream -------------------------------------------------------


class _EchoHandler(BaseHTTPRequestHandler):
    server: _UpstreamHTTPServer

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.upstream.record(self.path, dict(self.headers), body)
        reply = self.server.upstream.reply_for(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the test output clean
        return


class _UpstreamHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Upstream


@pytest.fixture(scope="package")
def upstream() -> Iterator[Upstream]:
    """An HTTP endpoint on 127.0.0.1 that records what the `http` handler POSTs and echoes it back."""
    httpd = _UpstreamHTTPServer(("127.0.0.1", 0), _EchoHandler)
    httpd.upstream = Upstream(url=f"http://127.0.0.1:{httpd.server_address[1]}/echo")
    thread = threading.Thread(target=httpd.serve_forever, name="e2e-upstream", daemon=True)
    thread.start()
    yield httpd.upstream
    httpd.shutdown()
    httpd.server_close()


# --- database, seed and servers ----------------------------------------------------------


@pytest.fixture(scope="package")
def e2e_database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database of the e2e servers' own: a fresh PostgreSQL database, or a temporary SQLite file."""
    base = os.environ.get("DATABASE_URL", "")
    if urlsplit(base).scheme not in {"postgres", "postgresql", "pgsql"}:
        yield f"sqlite:///{tmp_path_factory.mktemp('e2e-db') / 'e2e.sqlite3'}"
        return

    parts = urlsplit(base)
    name = f"mcp_e2e_{secrets.token_hex(4)}"
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="package")
def e2e_env(e2e_database_url: str, upstream: Upstream) -> dict[str, str]:
    """Environment of every e2e subprocess; the database is migrated and seeded, fetch_json points at `upstream`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        DJANGO_SETTINGS_MODULE="mcpsite.settings",
        DATABASE_URL=e2e_database_url,
        # Shared by both servers: signed cursors, admin sessions and CSRF tokens must verify on either.
        SECRET_KEY=secrets.token_urlsafe(50),
        DEBUG="0",
        MCP_ADMIN_PASSWORD=ADMIN_PASSWORD,
        MCP_HTTP_HANDLER_ALLOW="127.0.0.1",
        MCP_SECURE_USER_PASSWORD=oauth_flow.SECURE_PASSWORD,
        # This run's own Celery queue on the shared broker: no other run's worker takes its jobs.
        MCP_BACKGROUND_QUEUE=f"mcp-tools-e2e-{secrets.token_hex(4)}",
        PYTHONUNBUFFERED="1",
    )
    # The same steps as bin/serve.
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    manage(env, "seed_demo")
    # Point the seeded http tool at our upstream before any server caches the catalog.
    django_shell(
        env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='fetch_json')\n"
        f"tool.handler_config = {{**tool.handler_config, 'url': {upstream.url!r}}}\n"
        "tool.save()\n",
    )
    return env


@pytest.fixture(scope="package")
def server(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """Daphne A, serving the seeded demo tenant."""
    daphne = start_daphne("daphne-A", e2e_env, tmp_path_factory.mktemp("daphne-a"))
    yield daphne
    daphne.stop()


@pytest.fixture(scope="package")
def server_b(
    server: DaphneServer, e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """Daphne B: a second process on the same database (and Redis, when REDIS_URL is set)."""
    daphne = start_daphne("daphne-B", e2e_env, tmp_path_factory.mktemp("daphne-b"))
    yield daphne
    daphne.stop()


@pytest.fixture(scope="package")
def celery_worker(
    server: DaphneServer, e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A real Celery worker on the e2e database and the Redis broker: it runs the background tools."""
    require_services("background tools run on a Celery worker, which needs the Redis broker")
    worker = start_celery_worker("celery-worker", e2e_env, tmp_path_factory.mktemp("celery"))
    yield worker
    worker.stop()


# --- the OAuth server: a third Daphne with the test's CIMD trust settings ---------------------


@pytest.fixture(scope="package")
def oauth_ca() -> trustme.CA:
    """A throwaway certificate authority for the client ID metadata documents served on 127.0.0.1."""
    return trustme.CA()


@pytest.fixture(scope="package")
def cimd_documents(oauth_ca: trustme.CA) -> Iterator[DocumentServer]:
    """An HTTPS server on 127.0.0.1 (certificate from `oauth_ca`) serving client ID metadata documents."""
    docs = DocumentServer(oauth_ca)
    yield docs
    docs.close()


@pytest.fixture(scope="package")
def oauth_server(
    e2e_env: dict[str, str], oauth_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """Daphne for the OAuth tests: CIMD documents on 127.0.0.1 trusted through `oauth_ca`, token cache 1 s.

    Besides the seeded `secure` tenant and `secure-user`, it has a second `oauth` tenant and two more
    users (see tests/e2e/oauth_flow.py), so audience, membership and session ownership can be tested.
    """
    bundle = tmp_path_factory.mktemp("oauth-ca") / "ca.pem"
    oauth_ca.cert_pem.write_to_path(str(bundle))
    django_shell(e2e_env, oauth_flow.SETUP_CODE)
    env = {
        **e2e_env,
        "MCP_CIMD_ALLOWED_HOSTS": "127.0.0.1",
        "MCP_CIMD_CA_BUNDLE": str(bundle),
        # A revocation made by another process (or an expiry written to the database) shows within 1 s.
        "MCP_TOKEN_CACHE_SECONDS": "1",
    }
    daphne = start_daphne("daphne-oauth", env, tmp_path_factory.mktemp("daphne-oauth"))
    yield daphne
    daphne.stop()
