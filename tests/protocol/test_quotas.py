"""Tenant quotas (protocol/quotas.py): tool calls per minute per tenant, per tool and per caller."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest
import redis.asyncio.client
from asgiref.sync import sync_to_async

from mcp_app.infra import redis_client
from mcp_app.models import Tool
from mcp_app.protocol import quotas
from mcp_app.protocol.ratelimit import RATE_LIMITED
from tenants.models import Tenant
from tests.protocol.support import call, result_of
from tests.support import make_ctx

ECHO = {"name": "echo", "arguments": {"message": "x"}}
OTHER = {"name": "echo2", "arguments": {"message": "x"}}


@pytest.fixture
def quota_tenant(transactional_db, tenant_a) -> Tenant:
    for name in ("echo", "echo2"):
        Tool.objects.create(
            tenant=tenant_a, name=name, handler="template", handler_config={"text": "ok"},
            input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        )  # fmt: skip
    if redis_client.enabled():  # tenant ids repeat across tests: start from empty counters
        keys = redis_client.sync_client().keys(f"mcp:quota:{tenant_a.id}:*")
        if keys:
            redis_client.sync_client().delete(*keys)
    return tenant_a


@pytest.fixture
def mid_window(monkeypatch):
    """Keep the clock inside one minute's window: a run crossing its end would start counting again."""
    start = (int(time.time()) // 60) * 60 + 5.0
    monkeypatch.setattr(quotas, "time", type("T", (), {"time": staticmethod(lambda: start)}))


def with_quotas(tenant: Tenant, **quota: int) -> Any:
    Tenant.objects.filter(pk=tenant.pk).update(**quota)
    tenant.refresh_from_db()
    return lambda **kwargs: make_ctx(tenant, version="2026-07-28", session=None, **kwargs)


async def refused(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
    reply = await call(ctx, "tools/call", params)
    assert "error" in reply, reply
    assert reply["error"]["code"] == RATE_LIMITED
    return reply["error"]


async def test_a_tenant_quota_counts_every_caller_and_tool_together_and_says_when_to_retry(
    quota_tenant, mid_window
):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute=3)
    await result_of(ctx(user_id=1), "tools/call", ECHO)
    await result_of(ctx(user_id=2), "tools/call", OTHER)
    await result_of(ctx(client_address="10.0.0.9"), "tools/call", ECHO)
    error = await refused(ctx(user_id=3), OTHER)
    assert error["data"] == {"retryAfter": 55.0, "quota": "this server", "limit": 3}
    assert "at most 3 tool calls per minute for this server" in error["message"]


async def test_a_per_tool_quota_leaves_the_other_tools_alone(quota_tenant, mid_window):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute_per_tool=2)
    for _ in range(2):
        await result_of(ctx(user_id=1), "tools/call", ECHO)
    assert (await refused(ctx(user_id=2), ECHO))["data"]["quota"] == "the tool echo"
    await result_of(ctx(user_id=2), "tools/call", OTHER)


async def test_a_per_caller_quota_tells_users_clients_and_addresses_apart(quota_tenant, mid_window):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute_per_caller=1)
    await result_of(ctx(user_id=1, client_id="app"), "tools/call", ECHO)
    assert (await refused(ctx(user_id=1, client_id="other-app"), OTHER))["data"]["quota"] == "you"
    await result_of(ctx(user_id=2, client_id="app"), "tools/call", ECHO)
    await result_of(ctx(client_id="app"), "tools/call", ECHO)
    await result_of(ctx(client_address="10.0.0.1"), "tools/call", ECHO)
    await refused(ctx(client_address="10.0.0.1"), ECHO)
    await result_of(ctx(client_address="10.0.0.2"), "tools/call", ECHO)


async def test_a_call_refused_by_one_quota_spends_nothing_of_the_others(quota_tenant, mid_window):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute=2, calls_per_minute_per_caller=1)
    await result_of(ctx(user_id=1), "tools/call", ECHO)
    for _ in range(3):
        await refused(ctx(user_id=1), ECHO)  # the caller's quota: the tenant's is not spent by these
    await result_of(ctx(user_id=2), "tools/call", ECHO)


async def test_the_next_minute_starts_a_new_count(quota_tenant, monkeypatch):
    now = [(int(time.time()) // 60) * 60 + 59.0]
    monkeypatch.setattr(quotas, "time", type("T", (), {"time": staticmethod(lambda: now[0])}))
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute=1)
    await result_of(ctx(user_id=1), "tools/call", ECHO)
    assert (await refused(ctx(user_id=1), ECHO))["data"]["retryAfter"] == 1.0
    now[0] += 1.5
    await result_of(ctx(user_id=1), "tools/call", ECHO)


@pytest.fixture
def with_redis(settings):
    """The real Redis of the run (the tests using it are marked `services`: skipped, or failed in CI, without)."""
    settings.REDIS_URL = os.environ["REDIS_URL"]


@pytest.mark.services
async def test_with_redis_two_processes_share_one_quota_and_reserve_calls_in_batches(
    quota_tenant, mid_window, with_redis, monkeypatch
):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute=100)
    window = int(quotas.time.time() // 60)
    await redis.asyncio.Redis.from_url(os.environ["REDIS_URL"]).delete(
        f"mcp:quota:{quota_tenant.id}:all:{window}"
    )
    trips = {"n": 0}
    execute = redis.asyncio.client.Pipeline.execute

    async def counted(self, *args, **kwargs):
        trips["n"] += 1
        return await execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", counted)
    admitted = 0
    for i in range(130):
        if i % 10 == 0:
            quotas.reset()  # "another process": a fresh allowance, the same Redis counter
        reply = await call(ctx(user_id=i), "tools/call", ECHO)
        admitted += "result" in reply
    assert admitted == 100  # never more than the quota, across processes
    assert trips["n"] == 13  # one round trip per batch of 10 per process, none once the window is spent


@pytest.mark.services
async def test_with_redis_calls_made_at_once_are_all_admitted_while_the_quota_has_room(
    quota_tenant, mid_window, with_redis
):
    ctx = await sync_to_async(with_quotas)(quota_tenant, calls_per_minute=100, calls_per_minute_per_tool=100)
    replies = await asyncio.gather(*(call(ctx(user_id=i), "tools/call", ECHO) for i in range(40)))
    assert [r for r in replies if "error" in r] == []  # each call waits for a batch of its own if need be
