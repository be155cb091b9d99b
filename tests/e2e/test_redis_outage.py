"""Redis killed under a serving Daphne, then started again (issue 13's fault test).

A Redis of this test's own (a private redis-server on a free port) so nothing else is touched. While
it is down: session requests are refused clearly and at once (503 with Retry-After, or a JSON-RPC error
naming Redis, never a hang or a bare internal error), and 2026-07-28 calls, which need no Redis, go on.
Once it is back, the same Daphne serves sessions again without a restart.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, free_port, start_daphne

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="the outage is of a Redis server of the test's own (redis-server)"),
]

ANSWER_SECONDS = 10.0
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MODERN_ECHO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "echo",
        "arguments": {"message": "still here"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
MODERN_HEADERS = {
    **HEADERS,
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "echo",
}


class PrivateRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is installed wherever the Redis service runs"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + ANSWER_SECONDS
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.exceptions.ConnectionError:  # not up yet
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(ANSWER_SECONDS)


@pytest.fixture(scope="module")
def outage(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DaphneServer, PrivateRedis]]:
    redis_server = PrivateRedis()
    redis_server.start()
    env = {
        **e2e_env,
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "MCP_BACKGROUND_TOOLS": "inline",
    }
    daphne = start_daphne("daphne-outage", env, tmp_path_factory.mktemp("outage"))
    yield daphne, redis_server
    daphne.stop()
    if redis_server.proc and redis_server.proc.poll() is None:
        redis_server.kill()


async def test_a_redis_outage_is_refused_clearly_and_the_same_daphne_recovers_when_redis_is_back(
    outage: tuple[DaphneServer, PrivateRedis],
) -> None:
    daphne, redis_server = outage
    async with mcp_client(daphne.mcp_url()) as client:
        assert (await client.call_tool("echo", {"message": "before"})).content[0].text == "before"
    session = httpx.post(daphne.mcp_url(), json=INITIALIZE, headers=HEADERS, timeout=ANSWER_SECONDS)
    session_id = session.headers["mcp-session-id"]

    redis_server.kill()
    fresh = httpx.post(daphne.mcp_url(), json=INITIALIZE, headers=HEADERS, timeout=ANSWER_SECONDS)
    assert fresh.status_code == 200 and "Redis" in fresh.json()["error"]["message"]
    assert "mcp-session-id" not in fresh.headers  # no session was made
    existing = httpx.post(
        daphne.mcp_url(),
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"},
        timeout=ANSWER_SECONDS,
    )
    assert existing.status_code == 503 and existing.headers["retry-after"] == "5"
    assert "Redis" in existing.text and "Traceback" not in existing.text
    modern = httpx.post(daphne.mcp_url(), json=MODERN_ECHO, headers=MODERN_HEADERS, timeout=ANSWER_SECONDS)
    assert modern.status_code == 200 and modern.json()["result"]["content"][0]["text"] == "still here"

    redis_server.start()  # the same port: the process's pools reconnect by themselves
    async with mcp_client(daphne.mcp_url()) as client:
        assert (await client.call_tool("echo", {"message": "after"})).content[0].text == "after"
