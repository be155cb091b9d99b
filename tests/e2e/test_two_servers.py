"""Two Daphne processes share the database (and Redis): a client may move between them freely."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import anyio
import httpx
import pytest

from mcp_app.core import versions
from tests.e2e.helpers import (
    INITIALIZE_PARAMS,
    MCP_HEADERS,
    NOTIFY_SECONDS,
    REQUEST_SECONDS,
    AdminBrowser,
    parse_sse,
    rpc_reply,
)
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer
from tests.e2e.test_live_changes import tool_pk

pytestmark = pytest.mark.e2e


async def initialize_on(http: httpx.AsyncClient, server: DaphneServer) -> tuple[str, dict[str, str]]:
    """Initialize a session on `server`; return its id and the headers later requests carry."""
    response = await http.post(
        server.mcp_url(),
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
        headers=MCP_HEADERS,
    )
    reply = rpc_reply(response, 1)
    assert reply["result"]["protocolVersion"] == versions.V2025_06_18
    session_id = response.headers["mcp-session-id"]
    headers = {**MCP_HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": versions.V2025_06_18}
    return session_id, headers


async def call(
    http: httpx.AsyncClient,
    server: DaphneServer,
    headers: dict[str, str],
    request_id: int,
    method: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    response = await http.post(
        server.mcp_url(),
        json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        headers=headers,
    )
    return rpc_reply(response, request_id)


async def test_a_session_initialized_on_one_server_continues_on_the_other(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        _, headers = await initialize_on(http, server)
        initialized = await http.post(
            server_b.mcp_url(),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=headers,
        )
        assert initialized.status_code == 202, initialized.text
        echoed = await call(
            http, server_b, headers, 2, "tools/call", {"name": "echo", "arguments": {"message": "from B"}}
        )
        listed = await call(http, server, headers, 3, "tools/list", {})
    assert echoed["result"]["structuredContent"] == {"echo": "from B"}
    assert "echo" in {tool["name"] for tool in listed["result"]["tools"]}


@pytest.mark.services(reason="two Daphne processes share the Redis channel layer")
async def test_tl12_get_stream_held_on_one_server_receives_list_changed_for_an_admin_edit_on_the_other(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    pk = tool_pk(server.env, "add")
    received: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS, read=NOTIFY_SECONDS * 4)) as http:
        _, headers = await initialize_on(http, server)
        await http.post(
            server.mcp_url(), json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        get_headers = {key: value for key, value in headers.items() if key != "Content-Type"}
        get_headers["Accept"] = "text/event-stream"
        async with (
            http.stream("GET", server_b.mcp_url(), headers=get_headers) as stream,
            AdminBrowser(server.url) as admin,
        ):
            assert stream.status_code == 200, await stream.aread()
            assert stream.headers["content-type"].startswith("text/event-stream")

            async def read_events() -> None:
                buffer = ""
                async for chunk in stream.aiter_text():
                    buffer += chunk.replace("\r\n", "\n")
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        received.extend(parse_sse(block + "\n\n"))

            await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
            description = f"Adds two integers (edited on A, {secrets.token_hex(4)})."
            delivered = False
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_events)
                # Bounded: up to 3 edits, NOTIFY_SECONDS / 3 each (the first one normally suffices;
                # a repeat covers an edit racing the stream's subscription to the tenant group).
                for _ in range(3):
                    await admin.change(
                        f"/admin/mcp_app/tool/{pk}/change/", "tool_form", {"description": description}
                    )
                    with anyio.move_on_after(NOTIFY_SECONDS / 3):
                        while not any(
                            m.get("method") == "notifications/tools/list_changed" for m in received
                        ):
                            await anyio.sleep(0.05)
                        delivered = True
                    if delivered:
                        break
                tasks.cancel_scope.cancel()
    assert delivered, f"no tools/list_changed on B's GET stream within {NOTIFY_SECONDS:.0f} s; got {received}"
    assert all("id" not in message for message in received), "a GET stream carries no responses (HT-28)"


@pytest.mark.services(
    reason="the session's deletion on one Daphne must reach the other's session cache through Redis"
)
async def test_ht39_a_session_deleted_on_one_server_is_gone_on_the_other(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        _, headers = await initialize_on(http, server)
        # Both processes read it and keep it in memory (AMB-189; the first read starts each process's
        # listener for session changes): A must drop its copy when B ends the session.
        for request_id in range(2, 8):
            await call(http, server if request_id % 2 else server_b, headers, request_id, "ping", {})
            await asyncio.sleep(0.1)
        deleted = await http.delete(server_b.mcp_url(), headers=headers)
        assert deleted.status_code in (200, 204), deleted.text
        after = await http.post(
            server.mcp_url(), json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=headers
        )
    assert after.status_code == 404
