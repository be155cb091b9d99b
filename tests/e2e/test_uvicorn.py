"""The same ASGI application under uvicorn (uvloop, httptools), the faster option docs/operations.md gives.

The official SDK in `auto` and `legacy` mode: streaming progress and log messages, listen with an
admin edit, and a legacy session's GET stream, so every kind of stream works on that server too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client

from mcp_app.core import versions
from tests.e2e.helpers import REQUEST_SECONDS, Inbox, Reports, mcp_client
from tests.e2e.servers import DaphneServer, start_daphne
from tests.e2e.test_modern_era import listen_to_an_admin_edit

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
    reports = Reports()
    async with Client(
        uvicorn_server.mcp_url(),
        read_timeout_seconds=REQUEST_SECONDS,
        cache=None,
        logging_callback=reports.on_log,
        log_level="info",
    ) as client:
        assert client.protocol_version == versions.V2026_07_28
        result = await client.call_tool(
            "count_slowly", {"n": 2, "delay": 0.01}, progress_callback=reports.on_progress
        )
    assert result.content[0].text == "Counted to 2."
    assert reports.progress == [1.0, 2.0] and len(reports.logs) == 2


async def test_listen_hears_an_admin_edit_under_uvicorn(uvicorn_server: DaphneServer) -> None:
    await listen_to_an_admin_edit(uvicorn_server, uvicorn_server, "greet")


async def test_a_legacy_session_gets_its_get_stream_under_uvicorn(uvicorn_server: DaphneServer) -> None:
    inbox = Inbox()
    async with mcp_client(uvicorn_server.mcp_url(), inbox, mode="legacy") as client:
        assert client.protocol_version == versions.LATEST
        await inbox.wait_for_get_stream()
        echoed = await client.call_tool("echo", {"message": "legacy"})
    assert echoed.structured_content == {"echo": "legacy"}
