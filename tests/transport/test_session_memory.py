"""Sessions served from a process's memory with Redis (AMB-189): no round trip on a warm request, and
every change or end of a session made by another process reaches this one by push.

"Another process" is played by a second Redis client writing the session key and publishing on the
changes channel, exactly as another process's store does.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from mcp_app.streams import sessions
from tests.transport.support import Client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services(reason="sessions are kept in memory only with the Redis store"),
]

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


@pytest.fixture
async def other_process(settings) -> AsyncIterator[redis.asyncio.Redis]:
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_SESSION_CACHE_SECONDS = 10
    sessions.reset()
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        yield client
    finally:
        await client.aclose()
        await sessions.stop_listening()


async def warm(client: Client) -> None:
    """Two requests: the first starts this loop's listener, the second's read is kept in memory."""
    for _ in range(2):
        assert (await client.post(PING)).status == 200
        assert await sessions.listening()
    assert (await client.post(PING)).status == 200
    assert client.session_id in sessions._memory


async def publish(other: redis.asyncio.Redis, session_id: str) -> None:
    await other.publish(*sessions._memory.message(session_id))


async def until(predicate, seconds: float = 3.0) -> None:
    async with asyncio.timeout(seconds):
        while not await predicate():
            await asyncio.sleep(0.01)


async def test_a_warm_session_is_served_from_memory_without_reading_redis(tenant_a, other_process):
    client = Client()
    await client.initialize()
    await warm(client)
    # Deleted behind the store's back (no message, as an eviction by Redis's maxmemory would): this
    # process still answers from memory, which shows the request read nothing from Redis.
    await other_process.delete(sessions.KEY_PREFIX + (client.session_id or ""))
    assert (await client.post(PING)).status == 200


async def test_a_session_ended_by_another_process_answers_404_here_once_its_message_arrives(
    tenant_a, other_process
):
    client = Client()
    await client.initialize()
    await warm(client)
    await other_process.delete(sessions.KEY_PREFIX + (client.session_id or ""))
    await publish(other_process, client.session_id or "")

    async def gone() -> bool:
        return (await client.post(PING)).status == 404

    await until(gone)


async def test_a_session_changed_by_another_process_is_read_again_here(tenant_a, other_process):
    client = Client()
    await client.initialize()
    await warm(client)
    store = sessions.get_store()
    key = sessions.KEY_PREFIX + (client.session_id or "")
    data = json.loads(await other_process.get(key))
    data["log_level"] = "debug"
    await other_process.set(key, json.dumps(data), xx=True, keepttl=True)
    await publish(other_process, client.session_id or "")

    async def changed() -> bool:
        state = await store.get(client.session_id or "")
        return state is not None and state.log_level == "debug"

    await until(changed)


async def test_a_change_made_here_is_published_to_every_process(tenant_a, other_process):
    client = Client()
    await client.initialize()
    await warm(client)
    listener = other_process.pubsub()
    await listener.subscribe(sessions._memory.message("")[0])
    try:
        set_level = {"jsonrpc": "2.0", "id": 8, "method": "logging/setLevel", "params": {"level": "error"}}
        assert (await client.post(set_level)).status == 200
        async with asyncio.timeout(3):
            heard = []
            while client.session_id not in heard:
                message = await listener.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    heard.append(json.loads(message["data"])["key"])
        state = await sessions.get_store().get(client.session_id or "")
        assert state is not None and state.log_level == "error"
    finally:
        await listener.aclose()


async def test_a_session_kept_in_memory_is_read_again_after_the_cache_time_which_renews_its_ttl(
    tenant_a, other_process, monkeypatch
):
    client = Client()
    await client.initialize()
    await warm(client)
    key = sessions.KEY_PREFIX + (client.session_id or "")
    await other_process.expire(key, 100)
    assert (await client.post(PING)).status == 200
    assert await other_process.ttl(key) <= 100  # from memory: Redis was not asked
    later = sessions.time.monotonic() + 10
    monkeypatch.setattr(sessions.time, "monotonic", lambda: later)
    assert (await client.post(PING)).status == 200
    assert await other_process.ttl(key) > 100  # the read renewed the idle time


async def test_without_the_subscription_every_request_reads_redis(tenant_a, other_process):
    client = Client()
    await client.initialize()
    await warm(client)
    await sessions.stop_listening()
    sessions._memory.clear()  # what the listener's end does: it can no longer hear changes
    await other_process.delete(sessions.KEY_PREFIX + (client.session_id or ""))
    # The request restarts the listener, but until it is subscribed nothing is served from memory.
    assert (await client.post(PING)).status == 404


async def test_a_cache_time_of_zero_reads_redis_on_every_request(tenant_a, other_process, settings):
    settings.MCP_SESSION_CACHE_SECONDS = 0
    client = Client()
    await client.initialize()
    for _ in range(3):
        assert (await client.post(PING)).status == 200
    assert len(sessions._memory) == 0
    await other_process.delete(sessions.KEY_PREFIX + (client.session_id or ""))
    assert (await client.post(PING)).status == 404
