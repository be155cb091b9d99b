"""Fan-in end to end (AMB-180..183): an upstream drops a published tool and says so; the Daphne process
watching it syncs, the tool is disabled, and the SDK clients connected to our tenant are told, a legacy
one on its GET stream and a 2026-07-28 one on subscriptions/listen. Both upstream eras.

The Daphne here watches (MCP_UPSTREAM_WATCH=1, a rescan every second); the shared servers of tests/e2e
do not. The tenant is set up in a `manage.py shell`, as an owner's admin would.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged
from mcp_types import ToolListChangedNotification

from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer, django_shell, start_daphne
from tests.upstreams.conftest import legacy_upstream, modern_upstream  # noqa: F401
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
WAIT = 20.0


@pytest.fixture(scope="module")
def watching(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    env = {
        **e2e_env,
        "MCP_UPSTREAM_WATCH": "1",
        "MCP_UPSTREAM_WATCH_RESCAN_SECONDS": "1",
        "MCP_UPSTREAM_WATCH_DEBOUNCE_MS": "300",
    }
    daphne = start_daphne("daphne-watching", env, tmp_path_factory.mktemp("daphne-watching"))
    yield daphne
    daphne.stop()


@pytest.fixture(params=("2026-07-28", "legacy"))
def remote(request: pytest.FixtureRequest) -> UpstreamServer:
    return request.getfixturevalue("modern_upstream" if request.param == "2026-07-28" else "legacy_upstream")


async def control(server: UpstreamServer, arguments: dict[str, Any]) -> None:
    async with Client(server.url, mode="legacy") as client:
        assert (await client.call_tool("retool", arguments)).content[0].text == "done"


def federated_lists(server: UpstreamServer) -> int:
    return server.stats()["federated"].get("tools/list", 0)


async def tool_names(client: Any) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_a_tool_the_upstream_drops_is_disabled_and_our_clients_are_told(
    watching: DaphneServer, e2e_env: dict[str, str], remote: UpstreamServer
) -> None:
    doomed, slug = f"doomed_{secrets.token_hex(3)}", f"fanin-{secrets.token_hex(3)}"
    await control(remote, {"action": "add", "tool": doomed})
    before = federated_lists(remote)
    await asyncio.to_thread(
        django_shell,
        e2e_env,
        "from mcp_app.models import Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='docs', url={remote.url!r}, prefix='docs_', timeout_seconds=5)\n"
        "up.full_clean(); up.save()\nservice.sync(up)\n"
        f"service.publish(UpstreamTool.objects.get(upstream=up, remote_name={doomed!r}))\n",
    )
    # The shell's sync, then the watcher's own once it listens (what changed unheard is refetched).
    async with asyncio.timeout(WAIT):
        while federated_lists(remote) < before + 2:
            await asyncio.sleep(0.1)

    heard: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append("legacy")

    async with (
        sdk_client(watching.mcp_url(slug), "legacy", message_handler=on_message) as legacy,
        sdk_client(watching.mcp_url(slug), "auto") as modern,
    ):
        assert f"docs_{doomed}" in await tool_names(legacy)
        async with modern.listen(tools_list_changed=True) as subscription:
            await asyncio.sleep(0.5)  # the legacy client's GET stream opens after its handshake
            await control(remote, {"action": "remove", "tool": doomed})
            async with asyncio.timeout(WAIT):
                event = await anext(aiter(subscription))
                while not heard:
                    await asyncio.sleep(0.05)
        assert isinstance(event, ToolsListChanged)
        assert f"docs_{doomed}" not in await tool_names(legacy)
        assert f"docs_{doomed}" not in await tool_names(modern)
