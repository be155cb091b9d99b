"""SIGTERM to a serving Daphne: it stops taking connections, lets the call in flight finish, and ends
its open streams so their clients go elsewhere (a listen stream with its SubscriptionsListenResult)."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator

import anyio
import httpx
import pytest
from mcp import Client

from tests.e2e.helpers import REQUEST_SECONDS
from tests.e2e.servers import DaphneServer, start_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

GRACE_SECONDS = 15
SUBSCRIPTION = "shutdown-listener"
LISTEN = {
    "jsonrpc": "2.0",
    "id": SUBSCRIPTION,
    "method": "subscriptions/listen",
    "params": {
        "notifications": {"toolsListChanged": True},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
LISTEN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "subscriptions/listen",
}


@pytest.fixture
def doomed(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    env = {**e2e_env, "MCP_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS), "MCP_BACKGROUND_TOOLS": "inline"}
    daphne = start_daphne("daphne-sigterm", env, tmp_path_factory.mktemp("sigterm"))
    yield daphne
    daphne.stop()


def accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def test_sigterm_finishes_the_call_in_flight_ends_streams_gracefully_and_takes_no_new_connection(
    doomed: DaphneServer,
) -> None:
    results: dict[str, object] = {}
    listen_messages: list[dict] = []
    counting, listening = anyio.Event(), anyio.Event()

    async def slow_call() -> None:
        # 2026-07-28 (no GET stream to lose), with the SDK's cache: the tool list it checks results
        # against is fetched before the drain, when the process still takes requests.
        async def counted(progress: float, total: float | None, message: str | None) -> None:
            counting.set()

        async with Client(doomed.mcp_url(), read_timeout_seconds=REQUEST_SECONDS) as client:
            await client.list_tools()
            results["call"] = await client.call_tool(
                "count_slowly", {"n": 6, "delay": 0.5}, progress_callback=counted
            )

    async def listen() -> None:
        async with (
            httpx.AsyncClient(timeout=REQUEST_SECONDS) as http,
            http.stream("POST", doomed.mcp_url(), json=LISTEN, headers=LISTEN_HEADERS) as stream,
        ):
            listening.set()
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    listen_messages.append(json.loads(line[5:]))
        results["listen_ended"] = True

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(listen)
        tasks.start_soon(slow_call)
        # The call is under way (its first progress came), not merely started by this task: on a busy
        # machine a fixed second could end before its request was even sent.
        with anyio.fail_after(REQUEST_SECONDS):
            await counting.wait()
            await listening.wait()
        started = time.monotonic()
        doomed.proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(5):
            while accepts_connections(doomed.port):
                await anyio.sleep(0.05)  # the listening socket closes first
    assert results["call"].content[0].text == "Counted to 6."  # type: ignore[attr-defined]
    assert results.get("listen_ended") is True
    closing = listen_messages[-1]
    assert closing["id"] == SUBSCRIPTION and "error" not in closing
    assert closing["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == SUBSCRIPTION
    assert doomed.proc.wait(GRACE_SECONDS) == 0
    assert time.monotonic() - started < GRACE_SECONDS  # it left once the call was done, not at the deadline
