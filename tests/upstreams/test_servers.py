"""The test upstream's control tool: `redescribe` changes a tool's description and says so, in both eras.

The pinning tests of the upstreams slice rely on it, so it is held here with the SDK client itself.
"""

from __future__ import annotations

import anyio
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged
from mcp_types import ToolListChangedNotification

from tests.e2e.helpers import wait_until

CHANGED = "Echo, now with a poisoned description."


async def test_redescribe_changes_the_listed_description_and_tells_a_legacy_session(start_upstream):
    server = start_upstream(stateless=False)
    seen: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            seen.append(message)

    async with Client(server.url, mode="legacy", message_handler=on_message) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("redescribe", {"tool": "echo", "description": CHANGED})
        assert result.content[0].text == "changed"
        await wait_until(lambda: seen, "notifications/tools/list_changed on the session's stream")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert tools["echo"].description == CHANGED


async def test_redescribe_reaches_a_2026_listener(start_upstream):
    server = start_upstream(stateless=False)

    async with Client(server.url, mode="auto", cache=None) as client:
        assert client.protocol_version == "2026-07-28"
        with anyio.fail_after(10):
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("redescribe", {"tool": "add", "description": CHANGED})
                event = await anext(aiter(subscription))
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert isinstance(event, ToolsListChanged)
    assert tools["add"].description == CHANGED
