"""A hostile tenant's search (AMB-376, issue 36 §1) must not slow another tenant: 10,000 tools made to be
slow to search (64 words of one beginning, each in 60% of the tools: just within a search's budget), and
four clients (a process of their own) sending the most expensive query there is, 20 ms apart.

The catalog is loaded and indexed before the measurement. Loading a 10,000-tool catalog again (after each
publish) costs the process one pause of 150-250 ms, the collector scanning the heap the new catalog grew,
in full mode as in search mode (docs/operations.md, "Very large catalogs"); building its index runs on a
thread of its own and held the loop at most ~10 ms (bench/tool_search.py). Measured as every isolation test is: the other tenant's `greet` p99 during the
abuse against its idle p99 (tests/e2e/isolation.py), through Daphne."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable
from contextlib import AsyncExitStack

import httpx
import pytest

from tests.e2e.helpers import modern_request
from tests.e2e.hostile_clients import CALLERS, attacking
from tests.e2e.isolation import isolated, quiet_tenant_code
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]

TOOLS = 10_000
ATTACK_SECONDS = 3.0  # the hostile clients' searches, once all four are searching
ATTACK_PAUSE = 0.02  # between two searches of one client, as the other hostile-client tests pace theirs
WORST_QUERY = " ".join(["zzz", "zzz0", "zzz00", *(f"zzz{n:03d}" for n in range(13))])


def tenants(server: DaphneServer) -> tuple[str, str]:
    """A quiet tenant with `greet`, and the hostile one in search mode."""
    prefix = secrets.token_hex(3)
    quiet, hostile = f"quiet-{prefix}", f"hostile-{prefix}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        + quiet_tenant_code(quiet)
        + f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public', tool_discovery='search')\n"
        "def shared(n): return ' '.join(f'zzz{k:03d}' for k in range(64) if (n + 17 * k) % 10 < 6)\n"
        "Tool.objects.bulk_create(Tool(tenant=h, name=f'zzz_tool_{n:05d}', version=1, description=shared(n),"
        f" handler='template', handler_config={{'text': 'z'}}) for n in range({TOOLS}))\n"
        "h.save()\n",
    )
    return quiet, hostile


async def test_a_tenant_searching_ten_thousand_hostile_tools_does_not_slow_another(
    server: DaphneServer,
) -> None:
    quiet, hostile = await asyncio.to_thread(tenants, server)
    url = server.mcp_url(hostile)
    async with httpx.AsyncClient(timeout=60) as http:
        body, headers = modern_request(
            "tools/call", {"name": "search_tools", "arguments": {"query": WORST_QUERY, "limit": 50}}
        )
        warm = await http.post(url, json=body, headers=headers)
        assert warm.status_code == 200, warm.text[:300]
        assert len(warm.json()["result"]["structuredContent"]["tools"]) == 50

    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[float, str]]], None]:
        arguments = {"query": WORST_QUERY, "limit": 50}
        return attacking(url, "search_tools", arguments, ATTACK_SECONDS, ATTACK_PAUSE), None

    ended = await isolated(
        server.mcp_url(quiet), f"{CALLERS} clients searching {TOOLS} hostile tools", prepare
    )
    found = [text for _, text in ended if text.startswith('{"tools": [{"name": "zzz_tool_')]
    assert len(found) >= CALLERS, [text[:200] for _, text in ended[:3]]
