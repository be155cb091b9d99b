"""Caps on open SSE streams (streams/stream_slots.py, AMB-87) and the tenant's request body limit."""

from __future__ import annotations

import json

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from mcp_app.core.versions import V2026_07_28
from mcp_app.infra import redis_client
from mcp_app.protocol import quotas
from mcp_app.protocol.ratelimit import RATE_LIMITED
from mcp_app.streams import stream_slots
from tenants.models import Tenant
from tests.transport.support import BOTH, Client, call, messages, open_stream
from tests.transport.test_streams import count_call, get_stream, post_stream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_slots():
    quotas.reset()
    stream_slots.reset()
    if redis_client.enabled():
        client = redis.Redis.from_url(django_settings.REDIS_URL)
        keys = list(client.scan_iter("mcp:streams:*"))
        if keys:
            client.delete(*keys)
        client.close()
    yield


def capped(tenant: Tenant, **caps: int) -> None:
    row = Tenant.objects.get(pk=tenant.pk)
    for name, value in caps.items():
        setattr(row, name, value)
    row.save()  # moves the change token: every process serves the new caps at once


def assert_refused(response, limit: int, scope: str, request_id=None) -> None:
    assert response.status == 429, response.body
    assert response.headers["retry-after"] == str(stream_slots.RETRY_SECONDS)
    payload = json.loads(response.body)
    assert payload["id"] == request_id
    assert payload["error"]["code"] == RATE_LIMITED
    assert f"limit of {limit} open streams" in payload["error"]["message"]
    assert payload["error"]["data"] == {
        "retryAfter": stream_slots.RETRY_SECONDS,
        "limit": limit,
        "streams": scope,
    }


def listen_request() -> tuple[bytes, dict[str, str]]:
    message = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": V2026_07_28,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "accept": BOTH,
        "content-type": "application/json",
        "mcp-protocol-version": V2026_07_28,
        "mcp-method": "subscriptions/listen",
    }
    return json.dumps(message).encode(), headers


async def test_a_get_stream_past_the_tenants_cap_is_429_with_a_json_rpc_error_until_one_closes(tools_a):
    await sync_to_async(capped)(tools_a, max_streams=1)
    first, second = Client(), Client()
    await first.initialize()
    await second.initialize()
    held = await get_stream(first)
    assert held.status == 200
    refused = await call(
        "GET", second.path, headers={"accept": "text/event-stream", **second.session_headers()}
    )
    assert_refused(refused, 1, "server")
    await held.disconnect()
    opened = await get_stream(second)
    assert opened.status == 200
    await opened.disconnect()
    assert quotas.refusals() == {"streams": 1}


async def test_a_listen_stream_past_the_tenants_cap_is_refused_with_its_own_request_id(tools_a):
    await sync_to_async(capped)(tools_a, max_streams=1)
    client = Client()
    await client.initialize()
    held = await get_stream(client)
    body, headers = listen_request()
    refused = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert_refused(refused, 1, "server", request_id="listen-1")
    await held.disconnect()
    listening = await open_stream("POST", "/t/tenant-a/mcp", body, headers)
    _, acknowledged = await listening.next_message()
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    await listening.disconnect()


async def test_past_the_sessions_cap_a_post_is_answered_as_json_without_progress_then_streams_again(tools_a):
    await sync_to_async(capped)(tools_a, max_streams_per_session=1)
    client, other = Client(), Client()
    await client.initialize()
    await other.initialize()
    held = await get_stream(client)
    quiet = await client.post(count_call(n=3, delay=0))
    assert quiet.status == 200 and quiet.headers["content-type"] == "application/json"
    assert quiet.json()["result"]["structuredContent"] == {"count": 3}
    # Another session of the same tenant is not held back by this session's cap.
    streamed = await other.post(count_call(n=2, delay=0))
    assert streamed.headers["content-type"] == "text/event-stream"
    await held.disconnect()
    again = await client.post(count_call(n=2, delay=0))
    assert again.headers["content-type"] == "text/event-stream"
    sent = messages(again.events())
    assert [m["params"]["progress"] for m in sent if m.get("method") == "notifications/progress"] == [1, 2]
    assert quotas.refusals() == {"streams_per_session": 1}


async def test_a_second_get_of_a_capped_session_is_refused_by_the_cap_before_the_one_stream_rule(tools_a):
    await sync_to_async(capped)(tools_a, max_streams_per_session=1)
    client = Client()
    await client.initialize()
    streaming = await post_stream(client, count_call(n=50, delay=0.05))  # a long answer holds the slot
    assert streaming.headers["content-type"] == "text/event-stream"
    refused = await call(
        "GET", client.path, headers={"accept": "text/event-stream", **client.session_headers()}
    )
    assert_refused(refused, 1, "session")
    await streaming.read_to_end()
    opened = await get_stream(client)
    assert opened.status == 200
    await opened.disconnect()


async def test_a_tenant_without_stream_caps_counts_nothing(tools_a):
    client = Client()
    await client.initialize()
    held = await get_stream(client)
    assert stream_slots._local == {}
    if redis_client.enabled():
        client_redis = redis.Redis.from_url(django_settings.REDIS_URL)
        assert list(client_redis.scan_iter("mcp:streams:*")) == []
        client_redis.close()
    await held.disconnect()


@pytest.mark.services
async def test_with_redis_a_slot_whose_lease_ran_out_no_longer_counts(tools_a, settings):
    """A process killed with a stream open stops renewing; its slot frees itself (no leak). The lease
    is Redis's (the `services` marker: without Redis a process's count dies with it)."""
    await sync_to_async(capped)(tools_a, max_streams=1)
    client = Client()
    await client.initialize()
    key = f"{stream_slots.TENANT_PREFIX}{tools_a.pk}"
    raw = redis.Redis.from_url(settings.REDIS_URL)
    now = raw.time()[0]
    raw.zadd(key, {"dead-process-stream": now + 60})
    refused = await call(
        "GET", client.path, headers={"accept": "text/event-stream", **client.session_headers()}
    )
    assert refused.status == 429
    raw.zadd(key, {"dead-process-stream": now - 1})  # its lease ran out
    opened = await get_stream(client)
    assert opened.status == 200
    assert raw.zcard(key) == 1
    await opened.disconnect()
    assert raw.zcard(key) == 0  # given back when the stream ended
    raw.close()


async def test_the_tenants_body_limit_lowers_the_servers_and_each_413_is_counted(tools_a, settings):
    settings.MCP_MAX_BODY_BYTES = 4096
    await sync_to_async(capped)(tools_a, max_body_bytes=2048)
    client = Client()
    await client.initialize()
    big = {"name": "echo", "arguments": {"message": "x" * 3000}}
    refused = await client.request("tools/call", big)
    assert refused.status == 413
    assert refused.headers["content-type"].startswith("text/plain")
    assert "larger than 2048 bytes" in refused.body.decode()
    # A tenant's limit above the operator's does not raise it.
    await sync_to_async(capped)(tools_a, max_body_bytes=10_000)
    from_settings = await Client().post({}, raw=b"[" + b" " * 5000 + b"]")
    assert from_settings.status == 413 and "larger than 4096 bytes" in from_settings.body.decode()
    assert quotas.refusals() == {"body_size": 2}
