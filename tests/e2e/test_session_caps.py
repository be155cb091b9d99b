"""One client cannot fill a tenant's sessions (AMB-100..104), on a real Daphne behind a proxy's
X-Forwarded-For (--proxy-headers, as MCP_PROXY_HEADERS=1 runs it): a flood of `initialize` from one
address (httpx) is refused past its cap with 429, Retry-After and a JSON-RPC error naming the limit,
while the official SDK client from another address still connects and calls a tool; past the
tenant's cap the flooder gives way; a session nobody used expires after the short first idle time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.servers import DaphneServer, counting_tenant, start_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

PER_CLIENT = 4
FIRST_IDLE_SECONDS = 3


@pytest.fixture(scope="module")
def proxied(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """Daphne behind a (pretend) proxy: the client's address is X-Forwarded-For."""
    env = {
        **e2e_env,
        "MCP_SESSIONS_PER_CLIENT": str(PER_CLIENT),
        "MCP_SESSION_FIRST_IDLE_SECONDS": str(FIRST_IDLE_SECONDS),
    }
    daphne = start_daphne(
        "daphne-sessions", env, tmp_path_factory.mktemp("daphne-sessions"), proxy_headers=True
    )
    yield daphne
    daphne.stop()


@pytest.fixture(scope="module")
def proxied_b(proxied: DaphneServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """A second such process on the same database and Redis."""
    daphne = start_daphne(
        "daphne-sessions-b", proxied.env, tmp_path_factory.mktemp("daphne-sessions-b"), proxy_headers=True
    )
    yield daphne
    daphne.stop()


@asynccontextmanager
async def sdk_client(url: str, address: str) -> AsyncIterator[Client]:
    """The official SDK client in legacy mode (a session), coming from `address`."""
    http = httpx2.AsyncClient(timeout=REQUEST_SECONDS, headers={"X-Forwarded-For": address})
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=REQUEST_SECONDS
        )
        async with client:
            yield client


async def initialize(http: httpx.AsyncClient, url: str, address: str) -> httpx.Response:
    return await http.post(
        url,
        headers={**MCP_HEADERS, "X-Forwarded-For": address},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
    )


async def flood(url: str, address: str, n: int) -> list[httpx.Response]:
    """n initialize requests from one address, all at once; nothing after them."""
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        return list(await asyncio.gather(*(initialize(http, url, address) for _ in range(n))))


def metric(server: DaphneServer, prefix: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=REQUEST_SECONDS).text
    line = next((row for row in text.splitlines() if row.startswith(prefix)), None)
    return float(line.split()[-1]) if line else 0.0


def refusals(server: DaphneServer, limit: str) -> float:
    return metric(server, f'mcp_limit_refusals_total{{limit="{limit}"}}')


def assert_refused(response: httpx.Response, sessions: str, limit: int) -> None:
    assert response.status_code == 429, response.text
    assert "mcp-session-id" not in response.headers
    retry = int(response.headers["retry-after"])
    error = response.json()["error"]
    assert error["code"] == -32000
    assert error["data"] == {"retryAfter": retry, "limit": limit, "sessions": sessions}
    assert 1 <= retry <= 30


async def test_a_client_flooding_initialize_is_refused_while_a_client_from_another_address_connects(
    proxied: DaphneServer,
) -> None:
    url = proxied.mcp_url(counting_tenant(proxied.env, "flood"))
    before = refusals(proxied, "sessions_per_client")
    answers = await flood(url, "10.1.0.1", 12)
    accepted = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code != 200]
    assert len(accepted) == PER_CLIENT  # at once, and still never more than the cap
    for response in refused:
        assert_refused(response, "client", PER_CLIENT)
    assert "limit of 4 open sessions per client" in refused[0].json()["error"]["message"]
    async with sdk_client(url, "10.1.0.2") as client:  # another client, unaffected
        result = await client.call_tool("poke", {})
        assert result.content[0].text == "x"
    assert refusals(proxied, "sessions_per_client") == before + len(refused)


async def test_past_the_tenants_cap_the_flooder_gives_way_to_new_clients(proxied: DaphneServer) -> None:
    slug = counting_tenant(proxied.env, "full", max_sessions=3)
    url = proxied.mcp_url(slug)
    before = refusals(proxied, "sessions")
    answers = await flood(url, "10.2.0.1", 3)
    assert [r.status_code for r in answers] == [200, 200, 200]  # the tenant's whole cap
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        assert_refused(await initialize(http, url, "10.2.0.1"), "server", 3)
        async with sdk_client(url, "10.2.0.2") as first, sdk_client(url, "10.2.0.3") as second:
            for client in (first, second):
                assert (await client.call_tool("poke", {})).content[0].text == "x"
            # Each took the place of one of the flooder's sessions, which are gone.
            gone = 0
            for answer in answers:
                ping = await http.post(
                    url,
                    headers={**MCP_HEADERS, "X-Forwarded-For": "10.2.0.1",
                             "Mcp-Session-Id": answer.headers["mcp-session-id"]},
                    json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                )  # fmt: skip
                gone += ping.status_code == 404
            assert gone == 2
            # 1 to 1 to 1 now: the flooder may not take a session back.
            assert_refused(await initialize(http, url, "10.2.0.1"), "server", 3)
    assert refusals(proxied, "sessions") == before + 2


async def test_a_session_nobody_used_after_initialize_expires_sooner(proxied: DaphneServer) -> None:
    slug = counting_tenant(proxied.env, "idle")
    url = proxied.mcp_url(slug)
    gauge = f'mcp_open_sessions{{tenant="{slug}"}}'
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        unused = await initialize(http, url, "10.3.0.1")
        assert unused.status_code == 200
        async with sdk_client(url, "10.3.0.2") as client:  # initialize, then notifications/initialized
            assert metric(proxied, gauge) == 2
            deadline = asyncio.get_running_loop().time() + FIRST_IDLE_SECONDS + 15
            while metric(proxied, gauge) > 1:
                assert asyncio.get_running_loop().time() < deadline, "the unused session never expired"
                await asyncio.sleep(0.5)
            ping = await http.post(
                url,
                headers={**MCP_HEADERS, "X-Forwarded-For": "10.3.0.1",
                         "Mcp-Session-Id": unused.headers["mcp-session-id"]},
                json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
            )  # fmt: skip
            assert ping.status_code == 404
            assert (await client.call_tool("poke", {})).content[0].text == "x"  # the used one lives on


@pytest.mark.services("the caps are counted across processes in Redis")
async def test_two_processes_admit_one_clients_flood_together_never_past_its_cap(
    proxied: DaphneServer, proxied_b: DaphneServer
) -> None:
    slug = counting_tenant(proxied.env, "twoflood")
    answers = await asyncio.gather(
        flood(proxied.mcp_url(slug), "10.4.0.1", 10), flood(proxied_b.mcp_url(slug), "10.4.0.1", 10)
    )
    statuses = [r.status_code for batch in answers for r in batch]
    assert statuses.count(200) == PER_CLIENT and statuses.count(429) == 20 - PER_CLIENT
    async with sdk_client(proxied_b.mcp_url(slug), "10.4.0.2") as client:
        assert (await client.call_tool("poke", {})).content[0].text == "x"
