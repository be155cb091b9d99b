"""Fixtures of the transport tests: clean transport state per test, and tenant A's tools."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from mcp_app import catalog
from mcp_app.infra import redis_client
from mcp_app.models import Resource, Tool
from mcp_app.streams import events, session_admission, sessions, standalone, stream_slots


@pytest.fixture(autouse=True)
def clean_transport_state():
    """Forget every cached session, event and tenant; with Redis, drop only the project's keys."""
    catalog.clear_caches()
    sessions.reset()
    events.reset()
    standalone._local.clear()
    stream_slots.reset()
    session_admission.reset()
    if redis_client.enabled():
        client = redis.Redis.from_url(settings.REDIS_URL)
        for pattern in (
            "mcp:session:*",
            "mcp:events:*",
            "mcp:stream:*",
            "mcp:getstream:*",
            "mcp:tenant:*",
            "mcp:streams:*",
            "mcp:sessions:*",
        ):
            keys = list(client.scan_iter(pattern))
            if keys:
                client.delete(*keys)
        client.close()
    yield


@pytest.fixture
def tools_a(tenant_a):
    """Tenant A's python tools: echo and count_slowly (which reports progress)."""
    Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
        handler="python",
        handler_config={"callable": "echo"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="count",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}, "delay": {"type": "number"}},
        },
        handler="python",
        handler_config={"callable": "count_slowly"},
    )
    Resource.objects.create(tenant=tenant_a, uri="file:///a.txt", name="a", text="A")
    Resource.objects.create(tenant=tenant_a, uri="file:///b.txt", name="b", text="B")
    return tenant_a
