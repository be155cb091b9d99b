"""The hook on the request path: every request of both eras counted once, with no I/O of its own."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest
import redis.asyncio.client
from asgiref.sync import sync_to_async
from django.db.backends.utils import CursorWrapper

from mcp_app.catalog import tokens
from mcp_app.core.versions import V2026_07_28
from mcp_app.infra import redis_client
from mcp_app.streams import sessions
from mcp_app.usage import live
from mcp_app.usage.flush import Flusher
from mcp_app.usage.recorder import Recorder
from tests.transport.support import BOTH, Client, call, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = {"name": "echo", "arguments": {"message": "hi"}}
META = {
    "io.modelcontextprotocol/protocolVersion": V2026_07_28,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_body(method: str, params: dict[str, Any], id: Any = 1) -> tuple[bytes, dict[str, str]]:
    headers = {"accept": BOTH, "content-type": "application/json", "mcp-protocol-version": V2026_07_28}
    headers["mcp-method"] = method
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    message = {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}
    return json.dumps(message).encode(), headers


async def modern(method: str, params: dict[str, Any]) -> dict[str, Any]:
    body, headers = modern_body(method, params)
    response = await call("POST", "/t/tenant-a/mcp", body, headers)
    return response.json()


@pytest.fixture
def io_calls(monkeypatch):
    """Count SQL statements (any thread) and Redis round trips made while requests are served."""
    counter = {"sql": 0, "redis": 0}
    execute, executemany = CursorWrapper.execute, CursorWrapper.executemany
    command = redis.asyncio.client.Redis.execute_command
    pipeline = redis.asyncio.client.Pipeline.execute

    def counted_execute(self, *args, **kwargs):
        counter["sql"] += 1
        return execute(self, *args, **kwargs)

    def counted_executemany(self, *args, **kwargs):
        counter["sql"] += 1
        return executemany(self, *args, **kwargs)

    async def counted_command(self, *args, **kwargs):
        counter["redis"] += 1
        return await command(self, *args, **kwargs)

    async def counted_pipeline(self, *args, **kwargs):
        counter["redis"] += 1
        return await pipeline(self, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "execute", counted_execute)
    monkeypatch.setattr(CursorWrapper, "executemany", counted_executemany)
    monkeypatch.setattr(redis.asyncio.client.Redis, "execute_command", counted_command)
    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", counted_pipeline)
    return counter


def counted(rec: Recorder) -> dict[tuple[str, str], tuple[int, int, int]]:
    pending, _ = rec.take()
    found: dict[tuple[str, str], tuple[int, int, int]] = {}
    for (_tenant, _minute, method, tool), c in pending.items():
        calls, errors, tool_errors = found.get((method, tool), (0, 0, 0))
        found[(method, tool)] = (calls + c.calls, errors + c.errors, tool_errors + c.tool_errors)
    return found


async def test_warm_2026_requests_are_counted_once_each_with_no_sql_and_no_redis_call(
    tools_a, fresh_recorder, io_calls, settings
):
    # With Redis, change tokens are pushed to a listener (as in tests/performance/test_hot_path.py).
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = redis_client.enabled()
    for method, params in (("tools/call", ECHO), ("tools/list", {}), ("tools/list", {})):
        assert "result" in await modern(method, params)  # warm the tenant, catalog and kept answers
    fresh_recorder.take()
    io_calls.update(sql=0, redis=0)
    for _ in range(5):
        assert "result" in await modern("tools/call", ECHO)
    assert "result" in await modern("tools/list", {})  # answered from memory, still counted
    assert "error" in await modern("tools/call", {"name": "nope", "arguments": {}})
    assert io_calls == {"sql": 0, "redis": 0}
    assert counted(fresh_recorder) == {
        ("tools/call", "echo"): (5, 0, 0),
        ("tools/list", ""): (1, 0, 0),
        ("tools/call", "nope"): (1, 1, 0),
    }
    await tokens.stop_listening()


async def test_legacy_requests_notifications_and_errors_are_counted_by_outcome(tools_a, fresh_recorder):
    client = Client()
    await client.initialize()  # initialize counted; notifications/initialized is not a request
    assert "result" in (await client.request("tools/call", ECHO)).json()
    bad = await client.request("tools/call", {"name": "echo", "arguments": {}})  # missing "message"
    assert "error" in bad.json() or bad.json()["result"].get("isError")
    await client.request("tools/call", {"name": "nope", "arguments": {}})
    found = counted(fresh_recorder)
    assert found[("initialize", "")] == (1, 0, 0)
    assert found[("tools/call", "echo")][0] == 2 and sum(found[("tools/call", "echo")][1:]) == 1
    assert found[("tools/call", "nope")][0] == 1 and sum(found[("tools/call", "nope")][1:]) == 1
    assert not any(method.startswith("notifications/") for method, _ in found)


async def test_an_open_listen_stream_counts_as_a_listener_until_it_closes(tools_a, fresh_recorder):
    body, headers = modern_body(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="l1"
    )
    stream = await open_stream("POST", "/t/tenant-a/mcp", body, headers)
    _, ack = await stream.next_message()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    if not redis_client.enabled():  # without Redis the page reads this process's count directly
        assert live.active_listeners([tools_a.id]) == {tools_a.id: 1}
    assert fresh_recorder.listeners == {tools_a.id: 1}
    await stream.abort()
    for _ in range(50):
        if not fresh_recorder.listeners:
            break
        await asyncio.sleep(0.02)
    assert fresh_recorder.listeners == {}


async def test_open_sessions_are_counted_per_tenant_and_an_ended_one_is_not(tools_a, tenant_b):
    clients = [Client(), Client(), Client("tenant-b")]
    for client in clients:
        await client.initialize()
    count = sync_to_async(live.active_sessions)
    assert await count([tools_a.id, tenant_b.id]) == {tools_a.id: 2, tenant_b.id: 1}
    gone = clients[0]
    response = await call("DELETE", gone.path, headers=gone.session_headers())
    assert response.status == 204
    assert await count([tools_a.id, tenant_b.id]) == {tools_a.id: 1, tenant_b.id: 1}


def test_usage_reads_session_keys_with_the_session_stores_prefix():
    assert live.SESSION_KEY_PREFIX == sessions.KEY_PREFIX


@pytest.mark.services
async def test_with_redis_listeners_of_two_processes_add_up_and_a_dead_process_stops_counting(
    tools_a, settings
):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_USAGE_FLUSH_SECONDS = 10
    one, two = Recorder("host:1"), Recorder("host:2")
    one.listener_opened(tools_a.id)
    two.listener_opened(tools_a.id)
    two.listener_opened(tools_a.id)
    flush_one, flush_two = Flusher(one), Flusher(two)
    await sync_to_async(flush_one.flush)()
    await sync_to_async(flush_two.flush)()
    assert await sync_to_async(live.active_listeners)([tools_a.id], one) == {tools_a.id: 3}
    two.listener_closed(tools_a.id)
    two.listener_closed(tools_a.id)
    await sync_to_async(flush_two.flush)()  # its count gone from Redis
    assert await sync_to_async(live.active_listeners)([tools_a.id], one) == {tools_a.id: 1}
    # A process killed without a last flush: its count was published long ago and is ignored.
    dead = f"{live.LISTENERS_HASH}{tools_a.id}"
    await sync_to_async(redis_client.sync_client().hset)(dead, "host:dead", f"5 {time.time() - 3600}")
    assert await sync_to_async(live.active_listeners)([tools_a.id], one) == {tools_a.id: 1}
    assert not await sync_to_async(redis_client.sync_client().hexists)(dead, "host:dead")
