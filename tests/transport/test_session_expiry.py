"""Idle sessions expire after MCP_SESSION_IDLE_SECONDS (HT-39: an ended session answers 404)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from mcp_app.infra import redis_client
from mcp_app.models import McpSession
from mcp_app.streams import sessions
from tests.transport.support import Client

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


@pytest.fixture
def db_store(settings):
    settings.REDIS_URL = None
    sessions.reset()
    return sessions.get_store()


async def test_ht39_an_idle_session_expires_and_then_gets_404(tenant_a, db_store, monkeypatch):
    client = Client()
    await client.initialize()
    assert (await client.post(PING)).status == 200
    later = time.time() + settings.MCP_SESSION_IDLE_SECONDS + 1
    monkeypatch.setattr(sessions.time, "time", lambda: later)
    response = await client.post(PING)
    assert response.status == 404
    assert not await sync_to_async(McpSession.objects.filter(pk=client.session_id).exists)()


async def test_a_used_session_does_not_expire(tenant_a, db_store, monkeypatch):
    client = Client()
    await client.initialize()
    start = time.time()
    step = settings.MCP_SESSION_IDLE_SECONDS * 0.6
    for i in range(1, 4):  # each use is within the idle window of the previous one
        monkeypatch.setattr(sessions.time, "time", lambda i=i: start + i * step)
        assert (await client.post(PING)).status == 200


async def test_creating_a_session_sweeps_idle_ones_from_memory_and_the_database(
    tenant_a, db_store, monkeypatch
):
    old = Client()
    await old.initialize()
    later = time.time() + settings.MCP_SESSION_IDLE_SECONDS + sessions.SWEEP_INTERVAL_SECONDS + 1
    await sync_to_async(McpSession.objects.filter(pk=old.session_id).update)(
        last_seen_at=timezone.now() - timedelta(seconds=settings.MCP_SESSION_IDLE_SECONDS + 1)
    )
    monkeypatch.setattr(sessions.time, "time", lambda: later)
    await Client().initialize()
    assert old.session_id not in db_store._cache
    for task in list(db_store._touches):
        await task
    assert not await sync_to_async(McpSession.objects.filter(pk=old.session_id).exists)()


@pytest.mark.services
async def test_with_redis_a_session_key_carries_the_idle_ttl(tenant_a, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    sessions.reset()
    assert redis_client.enabled()
    client = Client()
    await client.initialize()
    r = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        ttl = await r.ttl(f"mcp:session:{client.session_id}")
        assert 0 < ttl <= settings.MCP_SESSION_IDLE_SECONDS
        await r.delete(f"mcp:session:{client.session_id}")  # what expiry does
        assert (await client.post(PING)).status == 404
    finally:
        await r.aclose()
