"""The same ASGI application under uvicorn (uvloop, httptools), the faster option docs/operations.md gives.

The official SDK in `auto` and `legacy` mode: streaming progress and log messages, listen with an
admin edit, and a legacy session's GET stream, so every kind of stream works on that server too.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_app.core import versions
from tests.e2e.helpers import REQUEST_SECONDS, AdminBrowser, Inbox, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, start_daphne
from tests.e2e.test_live_changes import tool_pk

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(scope="module")
def uvicorn_server(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    server = start_daphne("uvicorn", e2e_env, tmp_path_factory.mktemp("uvicorn"), uvicorn=True)
    yield server
    server.stop()


async def test_the_sdk_in_auto_mode_streams_progress_and_logs_under_uvicorn(
    uvicorn_server: DaphneServer,
) -> None:
    logs: list[Any] = []
    progress: list[float] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(
        uvicorn_server.mcp_url(),
        read_timeout_seconds=REQUEST_SECONDS,
        cache=None,
        logging_callback=on_log,
        log_level="info",
    ) as client:
        assert client.protocol_version == versions.V2026_07_28
        result = await client.call_tool(
            "count_slowly", {"n": 2, "delay": 0.01}, progress_callback=on_progress
        )
    assert result.content[0].text == "Counted to 2."
    assert progress == [1.0, 2.0] and len(logs) == 2


async def test_listen_hears_an_admin_edit_under_uvicorn(uvicorn_server: DaphneServer) -> None:
    pk = tool_pk(uvicorn_server.env, "greet")
    description = f"Greets someone (edited under uvicorn, {secrets.token_hex(4)})."
    async with (
        Client(uvicorn_server.mcp_url(), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client,
        AdminBrowser(uvicorn_server.url) as admin,
    ):
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        async with client.listen(tools_list_changed=True) as sub:
            await admin.change(f"/admin/mcp_app/tool/{pk}/change/", "tool_form", {"description": description})
            with anyio.fail_after(REQUEST_SECONDS):
                event = await sub.__anext__()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert tools["greet"].description == description


async def test_a_legacy_session_gets_its_get_stream_under_uvicorn(uvicorn_server: DaphneServer) -> None:
    inbox = Inbox()
    async with mcp_client(uvicorn_server.mcp_url(), inbox, mode="legacy") as client:
        assert client.protocol_version == versions.LATEST
        await inbox.wait_for_get_stream()
        echoed = await client.call_tool("echo", {"message": "legacy"})
    assert echoed.structured_content == {"echo": "legacy"}
