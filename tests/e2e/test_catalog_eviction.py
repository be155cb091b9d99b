"""A client cycling through more public tenants than a process keeps (issue 35 §4, AMB-367): each of its
requests loads a catalog and evicts another; a tenant in steady use must not be the one evicted, or
its every request after such a scan pays a cold load. Measured as every isolation test is: the other
tenant's `greet` p99 during the scan against its idle p99 (tests/e2e/isolation.py), through Daphne."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import AsyncExitStack

import httpx
import pytest

from tests.e2e.helpers import modern_request
from tests.e2e.isolation import isolated, quiet_tenant_code
from tests.e2e.servers import DaphneServer, django_shell, require_services, start_daphne

pytestmark = [pytest.mark.e2e]

# The process keeps this many tenants; the scan walks four times as many, each once per round (a cold
# load each: about 15 ms alone, 300 ms each with four at once on a loaded 2-core machine).
KEPT = 15
SCANNED = 4 * KEPT
SCAN_SECONDS = 3.0
SCANNERS = 4

MODERN_LIST, MODERN_HEADERS = modern_request("tools/list")


@pytest.fixture(scope="module")
def small_cache(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    # Measured in the layout that hosts strangers: on the embedded SQLite, the scan's own cold loads
    # cost the one process 3-7x another tenant's p99 whatever is evicted (noted for the embedded layout).
    require_services(
        "the cold loads are measured against PostgreSQL, the hosted layout's database", postgres=True
    )
    daphne = start_daphne(
        "daphne-catalogs", {**e2e_env, "MCP_CATALOG_TENANTS": str(KEPT)}, tmp_path_factory.mktemp("catalogs")
    )
    yield daphne
    daphne.stop()


def tenants(server: DaphneServer) -> tuple[str, list[str]]:
    """A quiet tenant with `greet`, and SCANNED public tenants of one tool each."""
    prefix = secrets.token_hex(3)
    quiet = f"quiet-{prefix}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        + quiet_tenant_code(quiet)
        + f"for i in range({SCANNED}):\n"
        f"    t = Tenant.objects.create(slug=f'scan-{prefix}-{{i}}', name=f'scan {{i}}', auth_mode='public')\n"
        "    Tool.objects.create(tenant=t, name='hello', handler='template', handler_config={'text': 'Hi'})\n",
    )
    return quiet, [f"scan-{prefix}-{i}" for i in range(SCANNED)]


async def test_a_client_walking_many_tenants_does_not_evict_a_tenant_in_steady_use(
    small_cache: DaphneServer,
) -> None:
    quiet, scanned = await asyncio.to_thread(tenants, small_cache)
    loads: list[int] = []

    async def scan() -> int:
        walked = [0]

        async def one_scanner(offset: int) -> int:
            done = 0
            async with httpx.AsyncClient(timeout=30) as http:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + SCAN_SECONDS
                index = offset
                # At least one whole round: every scanned tenant loaded once, the cache turned over.
                while loop.time() < deadline or walked[0] < SCANNED:
                    slug = scanned[index % SCANNED]
                    answer = await http.post(
                        small_cache.mcp_url(slug), json=MODERN_LIST, headers=MODERN_HEADERS
                    )
                    assert answer.status_code == 200, answer.text[:300]
                    assert answer.json()["result"]["tools"][0]["name"] == "hello"
                    done += 1
                    walked[0] += 1
                    index += SCANNERS
            return done

        counts = await asyncio.gather(*(one_scanner(i) for i in range(SCANNERS)))
        loads.append(sum(counts))
        return sum(counts)

    async def prepare(_: AsyncExitStack) -> tuple[asyncio.Future[int], None]:
        return asyncio.ensure_future(scan()), None

    await isolated(small_cache.mcp_url(quiet), f"a scan of {SCANNED} tenants past a cache of {KEPT}", prepare)
    assert loads and min(loads) >= SCANNED, loads  # the scan went round, evicting as it went
