"""End-to-end harness: real Daphne processes on 127.0.0.1 against their own seeded database.

The fixtures are package-scoped: the servers start once for tests/e2e and stop when it is done.
First `migrate`, `collectstatic` and `seed_demo` run as subprocesses (what `bin/serve` does)
against a fresh database: PostgreSQL `mcp_e2e_<random>` when DATABASE_URL points at PostgreSQL
(dropped at the end), a temporary SQLite file otherwise. REDIS_URL is passed through, so with
Redis the processes share the channel layer. Server output is attached to failing reports.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trustme
from playwright.async_api import Page
from psycopg import sql

from tests.e2e import databases, oauth_flow
from tests.e2e.browser import PAGE_MS, chromium, track_requests
from tests.e2e.helpers import Upstream
from tests.e2e.oauth_flow import DocumentServer
from tests.e2e.servers import (
    ADMIN_PASSWORD,
    LOG_OFFSETS,
    RUNNING,
    DaphneServer,
    EchoHandler,
    ServerProcess,
    UpstreamHTTPServer,
    django_shell,
    manage,
    require_services,
    secrets_in_logs,
    start_celery_worker,
    start_daphne,
    used_secret,
)

# Real SDK upstreams of both eras, module-scoped (this package's `upstream` is an HTTP endpoint).
from tests.upstreams.conftest import legacy_upstream, modern_upstream  # noqa: F401


@pytest.fixture(scope="package", autouse=True)
def no_secret_in_any_log() -> Iterator[None]:
    """Set up first, torn down last (every server stopped): no server log holds a secret a test used."""
    yield
    leaked = secrets_in_logs()
    assert not leaked, f"server logs hold secrets used by the tests: {leaked}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Runs before fixtures, so a test marked `services` never starts servers it cannot use.
    marker = item.get_closest_marker("services")
    if marker is not None:
        require_services(marker.kwargs.get("reason") or (marker.args[0] if marker.args else "real services"))
    item.stash[LOG_OFFSETS] = {server.name: server.log_size() for server in RUNNING}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.failed:
        offsets = item.stash.get(LOG_OFFSETS, {})
        for server in RUNNING:
            text = server.read_log(offsets.get(server.name, 0))
            if text.strip():
                report.sections.append((f"{server.name} output during this test", text[-20000:]))
    return report


@pytest.fixture(scope="package")
def upstream() -> Iterator[Upstream]:
    """An HTTP endpoint on 127.0.0.1 that records what the `http` handler POSTs and echoes it back."""
    httpd = UpstreamHTTPServer(("127.0.0.1", 0), EchoHandler)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.upstream = Upstream(url=f"{base}/echo", stream_url=f"{base}/stream")
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
    # Migrated already (tests/e2e/databases.py). The servers take DATABASE_ROLE (the tenant wall binds
    # it: AMB-96), which owns the database and what its migrations made.
    databases.clone_migrated(parts, name, os.environ.get("DATABASE_ROLE"))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def static_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the servers' static files are collected: one folder for every worker of this run (their
    base temporary folders share a parent under xdist), or one of this process's own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.getbasetemp().parent / "e2e-static"
    return tmp_path_factory.mktemp("e2e-static")


def collected(env: dict[str, str]) -> None:
    """collectstatic into STATIC_ROOT once for every worker sharing it: whitenoise compresses each file
    there, seconds of CPU a worker. A lock orders the workers; a marker says it is whole."""
    root = Path(env["STATIC_ROOT"])
    root.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root.parent / f"{root.name}.done"
        if not done.exists():
            manage(env, "collectstatic", "--noinput", "--verbosity", "0")
            done.touch()


@pytest.fixture(scope="package")
def e2e_env(
    e2e_database_url: str, upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """Environment of every e2e subprocess; the database is migrated and seeded, the http tools point at `upstream`.

    Mail goes to files in EMAIL_FILE_PATH (Django's file backend), where a test reads an invitation's link.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        # The project's settings but for a fast password hasher (tests/e2e/settings.py).
        DJANGO_SETTINGS_MODULE="tests.e2e.settings",
        DATABASE_URL=e2e_database_url,
        # Shared by both servers: signed cursors, admin sessions and CSRF tokens must verify on either.
        SECRET_KEY=used_secret(secrets.token_urlsafe(50)),
        DEBUG="0",
        MCP_ADMIN_PASSWORD=ADMIN_PASSWORD,
        MCP_HTTP_HANDLER_ALLOW="127.0.0.1",
        MCP_SECURE_USER_PASSWORD=oauth_flow.SECURE_PASSWORD,
        # This run's own Celery queue on the shared broker: no other run's worker takes its jobs.
        MCP_BACKGROUND_QUEUE=f"mcp-tools-e2e-{secrets.token_hex(4)}",
        PYTHONUNBUFFERED="1",
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(tmp_path_factory.mktemp("e2e-mail")),
        STATIC_ROOT=str(static_root(tmp_path_factory)),
        # Every test's clients reach the shared servers from 127.0.0.1, one "client" by address (AMB-100):
        # no per-client cap here; test_session_caps.py starts servers of its own with one.
        MCP_SESSIONS_PER_CLIENT="0",
        # The shared servers do not listen to upstreams (a sync of their own would race the tests' syncs);
        # test_upstream_fan_in.py starts a server that does.
        MCP_UPSTREAM_WATCH="0",
        # Most of the many servers the tests start never render a large template: their render
        # processes' forkserver (a Django start-up, ~2 s of CPU each) starts on first need. Daphne A
        # warms it, as a deployment does, for the tests that render large templates there.
        MCP_TEMPLATE_WARM="0",
        # Without Redis a server rereads a tenant's version from the database every 5 s (with it,
        # changes arrive at once): tests make tools with manage.py and use them the next moment, as
        # a person would not; 0.25 s keeps that race out of the no-services run.
        MCP_VERSION_RECHECK_SECONDS="0.25",
    )
    # The same steps as bin/serve (a PostgreSQL database was cloned from a migrated template).
    if e2e_database_url.startswith("sqlite"):
        manage(env, "migrate", "--noinput")
    collected(env)
    manage(env, "seed_demo")
    # Point the seeded http tools at our upstream before any server caches the catalog.
    django_shell(
        env,
        "from mcp_app.models import Tool\n"
        f"for name, url in [('fetch_json', {upstream.url!r}), ('stream_count', {upstream.stream_url!r})]:\n"
        "    tool = Tool.objects.get(tenant__slug='demo', name=name)\n"
        "    tool.handler_config = {**tool.handler_config, 'url': url}\n"
        "    tool.save()\n",
    )
    return env


@pytest.fixture(scope="package")
def server(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """Daphne A, serving the seeded demo tenant."""
    daphne = start_daphne("daphne-A", {**e2e_env, "MCP_TEMPLATE_WARM": "1"}, tmp_path_factory.mktemp("daphne-a"))
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
def usage_server(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """A Daphne flushing its usage every second, for the tests that read the dashboard."""
    daphne = start_daphne(
        "daphne-usage", {**e2e_env, "MCP_USAGE_FLUSH_SECONDS": "1"}, tmp_path_factory.mktemp("daphne-usage")
    )
    yield daphne
    daphne.stop()


@pytest.fixture(scope="package")
def celery_worker(
    server: DaphneServer, e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A real Celery worker on the e2e database and the Redis broker: it runs the background tools."""
    require_services("background tools run on a Celery worker, which needs the Redis broker")
    # Its pool children flush what they counted (upstream health) every second, as daphne-usage does.
    env = {**e2e_env, "MCP_USAGE_FLUSH_SECONDS": "1"}
    worker = start_celery_worker("celery-worker", env, tmp_path_factory.mktemp("celery"))
    yield worker
    worker.stop()


@pytest.fixture(scope="package")
def worker_if_any(request: pytest.FixtureRequest) -> Iterator[ServerProcess | None]:
    """The Celery worker when Redis is configured; None on embedded defaults (tools run in Daphne).
    Package-scoped, as the worker is, so that a module's set-up that calls tools can ask for it too."""
    yield request.getfixturevalue("celery_worker") if os.environ.get("REDIS_URL") else None


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


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    """A page of a fresh headless Chromium profile (no cookies), closed with its browser."""
    async with chromium() as browser:
        context = await browser.new_context()
        context.set_default_timeout(PAGE_MS)
        page = await context.new_page()
        track_requests(page)
        yield page
        await context.close()
