"""PostgreSQL drops every connection of a serving Daphne (pg_terminate_backend, as a failover or a
restart does): the next requests are answered as before, on new connections; nothing shows internals."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.e2e.helpers import AdminBrowser, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, require_services, start_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(scope="module")
def pg_daphne(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    require_services("the connections dropped are PostgreSQL's", postgres=True)
    # Tools in process: readiness then depends on PostgreSQL and Redis alone, no worker.
    env = {**e2e_env, "MCP_BACKGROUND_TOOLS": "inline"}
    daphne = start_daphne("daphne-pg-drop", env, tmp_path_factory.mktemp("pg-drop"))
    yield daphne
    daphne.stop()


def drop_connections(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


async def test_requests_after_postgresql_dropped_every_connection_are_answered_on_new_ones(
    pg_daphne: DaphneServer,
) -> None:
    async with mcp_client(pg_daphne.mcp_url()) as client, AdminBrowser(pg_daphne.url) as admin:
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        await client.call_tool("echo", {"message": "warm"})
        assert (await admin.http.get("/admin/mcp_app/tool/")).status_code == 200
        assert drop_connections(pg_daphne.env["DATABASE_URL"]) >= 1
        for _ in range(3):  # each thread's kept connection was dropped: every page reads its session
            page = await admin.http.get("/admin/mcp_app/tool/")
            assert page.status_code == 200 and "Traceback" not in page.text
            assert "echo" in page.text
        ready = httpx.get(f"{pg_daphne.url}/health/ready", headers={"accept": "application/json"}, timeout=10)
        assert ready.status_code == 200, ready.text
        assert (await client.call_tool("echo", {"message": "after"})).content[0].text == "after"
    async with mcp_client(pg_daphne.mcp_url()) as again:  # a new session: written to the store anew
        assert (await again.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"


async def test_readiness_is_ready_on_every_thread_once_postgresql_dropped_every_connection(
    pg_daphne: DaphneServer,
) -> None:
    # Sync checks run on the event loop's executor threads, each keeping a connection of its own;
    # polled many at once (as bench/readiness_flip.py does), none may answer with a dropped one.
    async with httpx.AsyncClient(headers={"accept": "application/json"}, timeout=10) as http:

        async def burst() -> list[httpx.Response]:
            return await asyncio.gather(*(http.get(f"{pg_daphne.url}/health/ready") for _ in range(8)))

        for _ in range(3):  # every executor thread has run the checks
            await burst()
        assert drop_connections(pg_daphne.env["DATABASE_URL"]) >= 1
        answers = [response for _ in range(10) for response in await burst()]
    not_ready = [response.text for response in answers if response.status_code != 200]
    assert not not_ready, f"{len(not_ready)} of {len(answers)} polls not ready: {not_ready[0]}"
