"""MCP Apps (io.modelcontextprotocol/ui) with the official SDK client, in both eras (AMB-272..274).

The demo's `roll_dice` names its app `ui://demo/dice.html`; `roll_again` is for the app only. A client
that declares the extension is told the server has it and sees both tools; one that does not (its
tool list goes to the model) sees `roll_dice` only, gets its rolls in words, and cannot call
`roll_again`.
"""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp.client.extension import advertise

from mcp_app.core import ui_apps
from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

APP = "ui://demo/dice.html"
MODES = ("legacy", "auto")


def with_apps() -> list:
    return [advertise(ui_apps.EXTENSION, {"mimeTypes": [ui_apps.MIME_TYPE]})]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_apps_sees_the_tool_and_its_link_reads_the_app_and_gets_words(
    server: DaphneServer, mode: str
) -> None:
    async with sdk_client(server.mcp_url(), mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "roll_dice" in tools and "roll_again" not in tools
        assert (tools["roll_dice"].meta or {})["ui"]["resourceUri"] == APP
        read = await client.read_resource(APP)
        [contents] = read.contents
        assert contents.mime_type == ui_apps.MIME_TYPE
        assert contents.text.startswith("<!DOCTYPE html>") and "ui/initialize" in contents.text
        assert (contents.meta or {}).get("ui") == {"prefersBorder": True}
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        assert listed[APP].mime_type == ui_apps.MIME_TYPE
        result = await client.call_tool("roll_dice", {"dice": 3, "sides": 6})
        assert not result.is_error
        [block] = result.content
        assert block.text.startswith("Rolled 3 6-sided dice: ")
        assert len(result.structured_content["rolls"]) == 3
        with pytest.raises(MCPError, match="Unknown tool: roll_again"):
            await client.call_tool("roll_again", {})
        extensions = client.server_capabilities.extensions or {}
        if mode == "auto":  # server/discover says what the tenant has, whoever asks
            assert extensions.get(ui_apps.EXTENSION) == {"mimeTypes": [ui_apps.MIME_TYPE]}
        else:  # initialize answers the client's declaration
            assert ui_apps.EXTENSION not in extensions


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_with_apps_is_told_and_its_app_may_call_the_app_only_tool(
    server: DaphneServer, mode: str
) -> None:
    async with sdk_client(server.mcp_url(), mode, extensions=with_apps()) as client:
        extensions = client.server_capabilities.extensions or {}
        assert extensions.get(ui_apps.EXTENSION) == {"mimeTypes": [ui_apps.MIME_TYPE]}
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"roll_dice", "roll_again"} <= set(tools)
        # The host keeps it out of the model's list: the visibility says so.
        assert (tools["roll_again"].meta or {})["ui"] == {"resourceUri": APP, "visibility": ["app"]}
        result = await client.call_tool("roll_again", {"dice": 1, "sides": 20})
        assert not result.is_error and 1 <= result.structured_content["total"] <= 20
