"""Tenant-wide events reach every open GET stream, and one bad event never ends a stream."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from channels.layers import get_channel_layer

from mcp_app.infra import notify, redis_client
from mcp_app.streams import sessions
from mcp_app.transport import stream_view
from tests.transport.support import Client, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

DELIVERY_SECONDS = 15  # generous bound for a loaded CI machine; typical delivery is well under 1 s
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


@pytest.fixture
def in_memory(settings):
    """The embedded default: no Redis, the in-memory channel layer, sessions in the database."""
    settings.REDIS_URL = None
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    sessions.reset()


async def get_stream(client: Client):
    return await open_stream(
        "GET", client.path, b"", {"accept": "text/event-stream", **client.session_headers()}
    )


async def open_many(n: int) -> list:
    """Open n initialized sessions, each with its GET stream (open = joined its groups)."""
    gate = asyncio.Semaphore(20)

    async def one():
        async with gate:
            client = Client()
            await client.initialize()
            stream = await get_stream(client)
            assert stream.status == 200
            return stream

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def assert_all_receive_list_changed(tenant_id: int, streams: list) -> float:
    started = time.monotonic()
    await notify.apublish_tenant(tenant_id, {"type": "mcp.list_changed", "kind": "tools", "version": 2})
    results = await asyncio.gather(
        *(s.next_message(DELIVERY_SECONDS) for s in streams), return_exceptions=True
    )
    elapsed = time.monotonic() - started
    got = [r for r in results if isinstance(r, tuple) and r[1] == LIST_CHANGED]
    assert len(got) == len(streams), f"{len(got)} of {len(streams)} streams got list_changed: {results[:3]}"
    await asyncio.gather(*(s.disconnect() for s in streams))
    return elapsed


async def test_every_one_of_100_open_get_streams_receives_a_tenant_wide_list_changed(tools_a, in_memory):
    streams = await open_many(100)
    assert await assert_all_receive_list_changed(tools_a.id, streams) < DELIVERY_SECONDS


@pytest.mark.services
async def test_with_redis_every_one_of_300_open_get_streams_receives_a_tenant_wide_list_changed(
    tools_a, settings, monkeypatch
):
    """300 streams at once used to exhaust redis-py's 100-connection pool (MaxConnectionsError)."""
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_SESSIONS_PER_CLIENT = 0  # 300 sessions from this one client address (AMB-100)
    assert redis_client.enabled()
    reads = 0
    peek = sessions.RedisSessionStore.peek

    async def counting_peek(self, session_id):
        nonlocal reads
        reads += 1
        return await peek(self, session_id)

    streams = await open_many(300)
    monkeypatch.setattr(sessions.RedisSessionStore, "peek", counting_peek)
    assert await assert_all_receive_list_changed(tools_a.id, streams) < DELIVERY_SECONDS
    assert reads == 0  # a broadcast costs no per-stream session read


async def test_a_stream_learns_of_notifications_initialized_sent_after_it_opened(tools_a):
    client = Client()
    await client.initialize(initialized=False)
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    await notify.apublish_tenant(tools_a.id, {"type": "mcp.list_changed", "kind": "tools", "version": 2})
    await stream.assert_quiet(0.2)  # LC-10: nothing before initialized
    assert (await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    await notify.apublish_tenant(tools_a.id, {"type": "mcp.list_changed", "kind": "tools", "version": 3})
    _, message = await stream.next_message()
    assert message == LIST_CHANGED
    await stream.disconnect()


async def test_rs_a_subscribe_made_after_the_stream_opened_gets_resources_updated(tools_a, monkeypatch):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    assert "result" in (await client.request("resources/subscribe", {"uri": "file:///b.txt"})).json()
    await stream.assert_quiet(0.1)  # the session_changed announcement is not forwarded
    # From here on the stream filters from memory: no session read per event.
    monkeypatch.setattr(sessions.DatabaseSessionStore, "peek", fail_peek)
    monkeypatch.setattr(sessions.RedisSessionStore, "peek", fail_peek)
    await notify.apublish_tenant(
        tools_a.id, {"type": "mcp.resource_updated", "uri": "file:///a.txt", "version": 4}
    )
    await notify.apublish_tenant(
        tools_a.id, {"type": "mcp.resource_updated", "uri": "file:///b.txt", "version": 5}
    )
    _, message = await stream.next_message()
    assert message["params"] == {"uri": "file:///b.txt"}
    monkeypatch.undo()
    assert "result" in (await client.request("resources/unsubscribe", {"uri": "file:///b.txt"})).json()
    await stream.assert_quiet(0.1)
    await notify.apublish_tenant(
        tools_a.id, {"type": "mcp.resource_updated", "uri": "file:///b.txt", "version": 6}
    )
    await stream.assert_quiet(0.3)
    await stream.disconnect()


async def fail_peek(self, session_id):
    raise AssertionError("a broadcast must not read the session")


async def test_an_error_while_handling_one_stream_event_is_logged_and_the_stream_goes_on(
    tools_a, monkeypatch, caplog
):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    original = stream_view.StreamView.notification_for
    calls = 0

    async def flaky(self, event):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return await original(self, event)

    monkeypatch.setattr(stream_view.StreamView, "notification_for", flaky)
    await notify.apublish_tenant(tools_a.id, {"type": "mcp.list_changed", "kind": "tools", "version": 2})
    await notify.apublish_tenant(tools_a.id, {"type": "mcp.list_changed", "kind": "prompts", "version": 3})
    _, message = await stream.next_message()
    assert message["method"] == "notifications/prompts/list_changed"
    assert "failed; the stream continues" in caplog.text
    await stream.disconnect()


async def test_a_failed_channel_layer_read_does_not_end_the_stream(tools_a, monkeypatch):
    layer = get_channel_layer()
    receive = layer.receive
    calls = 0

    async def flaky(channel):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError("Timeout reading from redis")
        return await receive(channel)

    monkeypatch.setattr(layer, "receive", flaky)
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.2)
    await notify.apublish_tenant(tools_a.id, {"type": "mcp.list_changed", "kind": "tools", "version": 2})
    _, message = await stream.next_message()
    assert message == LIST_CHANGED
    assert calls >= 2
    await stream.disconnect()
