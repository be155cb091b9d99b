"""Drafts through real Daphne and the official SDK client: a draft is invisible to connected clients, and
publishing reaches them once (AMB-218..221)."""

from __future__ import annotations

import secrets

import anyio
import pytest

from tests.e2e.helpers import AdminBrowser, Inbox, mcp_client, sdk_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer
from tests.e2e.test_live_changes import tool_pk

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

QUIET_SECONDS = 2.0


async def description_of(client: object, name: str) -> str:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}  # type: ignore[attr-defined]
    return tools[name].description or ""


async def test_a_draft_stays_unseen_and_publishing_tells_connected_clients_once(server: DaphneServer) -> None:
    pk = tool_pk(server.env, "add")
    path = f"/admin/mcp_app/tool/{pk}/change/"
    drafted = f"Adds two integers (a draft, {secrets.token_hex(4)})."
    inbox = Inbox()
    async with (
        mcp_client(server.mcp_url(), inbox) as legacy,
        sdk_client(server.mcp_url(), "auto") as modern,
        AdminBrowser(server.url) as admin,
    ):
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        await inbox.wait_for_get_stream()
        before = await description_of(legacy, "add")

        await admin.change(path, "tool_form", {"description": drafted}, button=("_save", "Save draft"))
        await anyio.sleep(QUIET_SECONDS)

        assert "notifications/tools/list_changed" not in inbox.methods()
        assert await description_of(legacy, "add") == before
        assert await description_of(modern, "add") == before

        # Publish the draft as the form shows it: nothing typed, just "Save and publish".
        await admin.change(path, "tool_form", {})
        await inbox.wait_for("notifications/tools/list_changed")
        await anyio.sleep(QUIET_SECONDS)

        assert inbox.methods().count("notifications/tools/list_changed") == 1
        assert await description_of(legacy, "add") == drafted
        assert await description_of(modern, "add") == drafted
