"""A client flooding the platform's MCP Registry (AMB-372) must not slow a tenant's clients: 500 listed
tenants, four clients asking for the largest page of a substring search, 20 ms apart, from a process of
their own and an address of their own (127.0.0.2: the reads an address may make a minute are counted
apart from every other test's). Measured as every isolation test is: the other tenant's `greet` p99
during the flood against its idle p99 (tests/e2e/isolation.py), through Daphne. Past its reads a minute
(MCP_REGISTRY_READS_PER_MINUTE, 60) the flood is answered 429; without that limit, on CI's loaded
machine, it cost the other tenant 4-5.5x."""

from __future__ import annotations

import asyncio
import secrets
import time
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from tests.e2e.hostile_clients import apart
from tests.e2e.isolation import isolated, quiet_tenant_code
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]

LISTED = 500
CLIENTS = 4
FLOOD_SECONDS = 3.0
PAUSE = 0.02
FLOOD_ADDRESS = "127.0.0.2"  # loopback too: Linux answers all of 127.0.0.0/8


def tenants(server: DaphneServer) -> tuple[str, str]:
    """A quiet tenant with `greet`, and LISTED listed tenants whose names share `prefix`."""
    prefix = secrets.token_hex(3)
    quiet = f"quiet-{prefix}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        + quiet_tenant_code(quiet)
        + f"Tenant.objects.bulk_create(Tenant(slug=f'listed-{prefix}-{{n:04d}}', name=f'Listed {{n}}', auth_mode='public',"
        f" registry_listed=True) for n in range({LISTED}))\n",
    )
    return quiet, f"listed-{prefix}"


def flood(url: str, started: Any, stop: Any, results: Any) -> None:
    """CLIENTS clients asking for `url` again and again, PAUSE apart, until `stop`: their statuses."""

    async def client(statuses: list[int]) -> None:
        transport = httpx.AsyncHTTPTransport(local_address=FLOOD_ADDRESS)
        async with httpx.AsyncClient(timeout=30, transport=transport) as http:
            while not stop.is_set():
                statuses.append((await http.get(url)).status_code)
                started.set()
                await asyncio.sleep(PAUSE)

    async def all_of_them() -> list[int]:
        statuses: list[int] = []
        await asyncio.gather(*(client(statuses) for _ in range(CLIENTS)))
        return statuses

    results.put(asyncio.run(all_of_them()))


async def test_a_client_flooding_the_registry_search_slows_no_tenant(server: DaphneServer) -> None:
    quiet, prefix = await asyncio.to_thread(tenants, server)
    url = f"{server.url}/v0.1/servers?search={prefix}&limit=100"
    async with httpx.AsyncClient(timeout=30) as http:
        page = (await http.get(url)).json()
    assert page["metadata"]["count"] == 100 and "nextCursor" in page["metadata"]
    began = time.perf_counter()

    async def prepare(_: AsyncExitStack) -> tuple[asyncio.Future[list[int]], None]:
        return asyncio.ensure_future(apart(flood, (url,), FLOOD_SECONDS)), None

    statuses = await isolated(server.mcp_url(quiet), f"{CLIENTS} clients flooding a registry search", prepare)
    # Each attempt's flood reads until its address's minute is spent, then is refused.
    assert statuses and set(statuses) <= {200, 429} and 429 in statuses, (
        set(statuses),
        time.perf_counter() - began,
    )
