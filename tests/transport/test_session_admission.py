"""Admission of new sessions (streams/session_admission.py, AMB-100..104), on both session stores:
a cap per client, the tenant's cap shared by ending the heaviest client's least recently used session,
refusals that name their limit, and a short life for sessions nobody used."""

from __future__ import annotations

import asyncio
import datetime
import os
import time

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_app.core.context import Caller
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.models import McpSession
from mcp_app.protocol import quotas
from mcp_app.protocol.ratelimit import RATE_LIMITED
from mcp_app.streams import session_admission, sessions
from tenants.models import Tenant
from tests.e2e.helpers import INITIALIZE_PARAMS
from tests.transport.support import Client, call

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE_PARAMS}


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.services)])
def backend(request, settings) -> str:
    """Each test runs on the database store and (with REDIS_URL) on the Redis one."""
    settings.REDIS_URL = os.environ["REDIS_URL"] if request.param == "redis" else None
    return request.param


def capped(tenant: Tenant, **caps: int) -> Tenant:
    Tenant.objects.filter(pk=tenant.pk).update(**caps)
    tenant.refresh_from_db()
    return tenant


async def opened(address: str, initialized: bool = True) -> Client:
    client = Client(address=address)
    await client.initialize(initialized=initialized)
    return client


async def alive(client: Client) -> bool:
    response = await client.request("ping")
    assert response.status in (200, 404), response.body
    return response.status == 200


def test_a_client_is_its_user_else_its_oauth_client_else_its_address():
    assert session_admission.client_key(Caller(user_id=7, client_id="app"), "10.0.0.1") == "user:7"
    assert session_admission.client_key(Caller(client_id="app"), "10.0.0.1") == "client:app"
    assert session_admission.client_key(Caller(), "10.0.0.1") == "address:10.0.0.1"
    assert session_admission.client_key(Caller(), None) == "address:unknown"
    assert len(session_admission.client_key(Caller(client_id="https://x/" + "a" * 1000), None)) == 200


async def test_a_client_at_its_cap_gets_429_naming_the_limit_while_another_client_connects(
    tools_a, backend, settings
):
    settings.MCP_SESSIONS_PER_CLIENT = 2
    flooder = [await opened("10.0.0.1"), await opened("10.0.0.1", initialized=False)]
    refused = await Client(address="10.0.0.1").post(INITIALIZE)
    assert refused.status == 429
    assert "mcp-session-id" not in refused.headers
    error = refused.json()["error"]
    assert error["code"] == RATE_LIMITED and "limit of 2 open sessions per client" in error["message"]
    # Retry when the soonest of its sessions expires: the unused one, within the first idle time.
    retry = int(refused.headers["retry-after"])
    assert 1 <= retry <= settings.MCP_SESSION_FIRST_IDLE_SECONDS
    assert error["data"] == {"retryAfter": retry, "limit": 2, "sessions": "client"}
    other = await opened("10.0.0.2")  # another address is another client
    assert (await other.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})).status == 200
    assert all([await alive(c) for c in flooder])
    assert quotas.refusals() == {"sessions_per_client": 1}


async def test_a_deleted_session_gives_its_client_its_place_back(tools_a, backend, settings):
    settings.MCP_SESSIONS_PER_CLIENT = 1
    first = await opened("10.0.0.1")
    assert (await Client(address="10.0.0.1").post(INITIALIZE)).status == 429
    ended = await call("DELETE", first.path, headers=first.session_headers(), address="10.0.0.1")
    assert ended.status == 204
    await opened("10.0.0.1")


async def test_past_the_tenants_cap_the_heaviest_client_gives_way_with_its_least_recently_used_session(
    tools_a, backend, settings
):
    settings.MCP_SESSIONS_PER_CLIENT = 10
    await sync_to_async(capped)(tools_a, max_sessions=3)
    unused = await opened("10.0.0.1", initialized=False)  # expires first: never used
    used = [await opened("10.0.0.1"), await opened("10.0.0.1")]
    newcomer = await opened("10.0.0.2")  # the tenant is full, but the flooder holds 3 to its 0
    assert not await alive(unused)
    assert all([await alive(c) for c in [*used, newcomer]])
    # Now 2 to 1: neither may take the other's (they would trade one session back and forth).
    for address in ("10.0.0.2", "10.0.0.1"):
        refused = await Client(address=address).post(INITIALIZE)
        assert refused.status == 429
        error = refused.json()["error"]
        assert "limit of 3 open sessions" in error["message"]
        assert error["data"]["sessions"] == "server" and error["data"]["limit"] == 3
        assert 1 <= int(refused.headers["retry-after"]) <= quotas.CAP_RETRY_SECONDS
    assert quotas.refusals() == {"sessions": 2}


async def test_admissions_at_the_same_moment_never_pass_the_cap(tenant_a, backend, settings):
    """Ids admitted but not yet stored (their initialize still running) count."""
    settings.MCP_SESSIONS_PER_CLIENT = 3
    tenant = TenantInfo(id=tenant_a.id, slug=tenant_a.slug, name=tenant_a.name)

    async def one(n: int) -> bool:
        try:
            await session_admission.admit(tenant, f"s{n}", "address:10.0.0.9")
        except session_admission.SessionsRefused:
            return False
        return True

    admitted = await asyncio.gather(*(one(n) for n in range(12)))
    assert sum(admitted) == 3
    assert quotas.refusals() == {"sessions_per_client": 9}


@pytest.mark.services
async def test_with_redis_a_session_nobody_used_is_kept_only_the_first_idle_time(tools_a, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_SESSION_FIRST_IDLE_SECONDS = 7
    unused = await opened("10.0.0.1", initialized=False)
    used = await opened("10.0.0.1")
    redis = redis_client.client()
    assert 0 < await redis.ttl(sessions.KEY_PREFIX + (unused.session_id or "")) <= 7
    assert await redis.ttl(sessions.KEY_PREFIX + (used.session_id or "")) > 7  # its second request renewed it
    assert await alive(unused)  # ...as any request does
    assert await redis.ttl(sessions.KEY_PREFIX + (unused.session_id or "")) > 7


async def test_in_the_database_a_session_nobody_used_expires_after_the_first_idle_time(
    tools_a, settings, monkeypatch
):
    settings.REDIS_URL = None
    settings.MCP_SESSION_FIRST_IDLE_SECONDS = 7
    unused = await opened("10.0.0.1", initialized=False)
    used = await opened("10.0.0.1")
    for task in list(sessions.get_store()._touches):  # the first use is written at once
        await task
    later = timezone.now() + datetime.timedelta(seconds=8)
    still_open = await sync_to_async(
        lambda: set(McpSession.objects.open(later).values_list("pk", flat=True))
    )()
    assert still_open == {used.session_id}
    # The process's cache in front of the rows forgets it on the same schedule.
    eight_seconds_on = time.time() + 8
    monkeypatch.setattr(sessions.time, "time", lambda: eight_seconds_on)
    assert not await alive(unused)
    assert await alive(used)
