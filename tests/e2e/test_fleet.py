"""Three hosts behind a real load balancer (issue 35 §1): network namespaces on this machine, a Daphne in
each, HAProxy round-robin with health checks on `/health/ready` (tests/fleet/hosts.py). No sticky
sessions: a legacy session's requests land on every host and see one session; a host lost mid-call
leaves the client's next requests to the others."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import require_services
from tests.fleet.hosts import Fleet, available

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(scope="module")
def fleet(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_services("the hosts share one PostgreSQL", postgres=True)
    require_services("the hosts share sessions and streams through Redis")
    why = available()
    if why is not None:
        if e2e_env.get("MCP_E2E_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{why}: the fleet's hosts are network namespaces", pytrace=False)
        pytest.skip(f"{why}: the fleet's hosts are network namespaces")
    hosts = Fleet(e2e_env, tmp_path_factory.mktemp("fleet"))
    try:
        yield hosts.open()
    finally:
        hosts.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_clients_requests_land_on_every_host_and_are_answered_as_one_server(
    fleet: Fleet, mode: str
) -> None:
    before = [host.served('"POST /t/demo/mcp') for host in fleet.hosts]
    async with mcp_client(fleet.mcp_url(), mode=mode) as client:
        for i in range(12):
            assert (await client.call_tool("add", {"a": i, "b": 1})).content[0].text == str(i + 1)
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
    served = [host.served('"POST /t/demo/mcp') - seen for host, seen in zip(fleet.hosts, before, strict=True)]
    assert all(count > 0 for count in served), f"POSTs per host: {served}"


async def test_a_host_lost_mid_call_leaves_the_clients_next_requests_to_the_others(fleet: Fleet) -> None:
    """Runs last: the host stays lost."""
    async with mcp_client(fleet.mcp_url()) as client:
        await client.call_tool("echo", {"message": "before"})
        calls = [
            asyncio.create_task(client.call_tool("count_slowly", {"n": 6, "delay": 0.25})) for _ in range(3)
        ]
        await asyncio.sleep(0.5)
        lost = fleet.hosts[0]
        await asyncio.to_thread(lost.kill)
        # The calls the lost host ran end with it (their stream was cut); the others finish.
        done = await asyncio.gather(*calls, return_exceptions=True)
        assert any(not isinstance(outcome, BaseException) for outcome in done), done
        before = [host.served('"POST /t/demo/mcp') for host in fleet.hosts[1:]]
        for i in range(8):  # the session lives on in Redis: the other hosts answer it
            assert (await client.call_tool("echo", {"message": f"after {i}"})).content[0].text == f"after {i}"
        served = [
            host.served('"POST /t/demo/mcp') - seen
            for host, seen in zip(fleet.hosts[1:], before, strict=True)
        ]
        assert all(count > 0 for count in served), f"POSTs per remaining host: {served}"
