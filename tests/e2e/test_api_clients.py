"""The management API on a real Daphne: a tool POSTed with a `manage` token reaches connected SDK clients
of both eras at once (tools/list_changed on the legacy GET stream and on a 2026-07-28 listen stream),
and they call it."""

from __future__ import annotations

import secrets

import anyio
import httpx
import pytest
from mcp import Client

from tests.e2e.helpers import REQUEST_SECONDS, Inbox, mcp_client
from tests.e2e.servers import ADMIN_USERNAME, DaphneServer, manage, used_secret

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def test_a_tool_created_through_the_api_is_announced_to_both_eras_and_can_be_called(
    server: DaphneServer,
) -> None:
    token = used_secret(manage(server.env, "api_token", ADMIN_USERNAME).strip().splitlines()[-1])
    name = f"api_made_{secrets.token_hex(3)}"
    tool = {
        "name": name,
        "description": "Made through the management API.",
        "handler": "template",
        "handler_config": {"text": "Hello from {{ who }}!"},
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
    }
    inbox = Inbox()
    async with (
        mcp_client(server.mcp_url(), inbox) as legacy,
        Client(server.mcp_url(), read_timeout_seconds=REQUEST_SECONDS, cache=None) as modern,
        httpx.AsyncClient(base_url=server.url, headers={"authorization": f"Bearer {token}"}) as api,
    ):
        await inbox.wait_for_get_stream()
        async with modern.listen(tools_list_changed=True) as sub:
            created = await api.post("/api/v1/tenants/demo/tools/", json=tool)
            assert created.status_code == 201, created.text
            with anyio.fail_after(REQUEST_SECONDS):
                event = await sub.__anext__()
            await inbox.wait_for("notifications/tools/list_changed")
        assert type(event).__name__ == "ToolsListChanged"
        for client in (legacy, modern):
            assert name in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(name, {"who": "the API"})
            assert result.content[0].text == "Hello from the API!"
        deleted = await api.delete(f"/api/v1/tenants/demo/tools/{created.json()['id']}/")
        assert deleted.status_code == 204
        assert name not in {t.name for t in (await modern.list_tools()).tools}
