"""Caps per tenant (protocol/quotas.py): open sessions and background runs at once, each refused clearly."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from mcp_app.models import Tool, ToolRun
from mcp_app.protocol import quotas
from mcp_app.protocol.ratelimit import RATE_LIMITED
from tenants.models import Tenant
from tests.protocol.support import call as dispatch_call
from tests.support import make_ctx
from tests.transport.support import Client, call

pytestmark = pytest.mark.django_db(transaction=True)


def capped(tenant: Tenant, **caps: int) -> Tenant:
    Tenant.objects.filter(pk=tenant.pk).update(**caps)
    tenant.refresh_from_db()
    return tenant


async def test_a_new_session_past_the_tenants_cap_is_429_with_retry_after_until_one_ends(tools_a):
    await sync_to_async(capped)(tools_a, max_sessions=1)
    first = Client()
    await first.initialize()
    second = Client()
    refused = await second.post(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    )  # fmt: skip
    assert refused.status == 429
    assert refused.headers["retry-after"] == str(quotas.CAP_RETRY_SECONDS)
    error = refused.json()["error"]
    assert error["code"] == RATE_LIMITED and "limit of 1 open sessions" in error["message"]
    assert error["data"] == {"retryAfter": quotas.CAP_RETRY_SECONDS, "limit": 1, "sessions": "server"}
    # The open session goes on; once it ends, a new one is made.
    assert (await first.request("tools/list")).status == 200
    ended = await call("DELETE", first.path, headers={"mcp-session-id": first.session_id or ""})
    assert ended.status in (200, 204)
    await second.initialize()
    assert quotas.refusals() == {"sessions": 1}


async def test_a_2024_11_05_sse_session_past_the_cap_is_refused_in_plain_words(tools_a):
    await sync_to_async(capped)(tools_a, max_sessions=1)
    await Client().initialize()
    refused = await call("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    assert refused.status == 429
    assert "limit of 1 open sessions" in refused.body.decode()


async def test_a_background_call_past_the_cap_of_runs_at_once_is_refused_and_runs_nothing(tenant_a, settings):
    settings.MCP_BACKGROUND_TOOLS = "celery"  # the cap is of worker runs
    await sync_to_async(capped)(tenant_a, max_background_runs=2)
    await Tool.objects.acreate(
        tenant=tenant_a, name="slow", handler="template", handler_config={"text": "x"}, execution="background"
    )
    for n in range(2):
        await ToolRun.objects.acreate(
            job_id=f"busy-{n}", tenant=tenant_a, tool_name="slow", status=ToolRun.Status.RUNNING
        )
    await ToolRun.objects.acreate(
        job_id="done", tenant=tenant_a, tool_name="slow", status=ToolRun.Status.DONE
    )
    reply = await dispatch_call(make_ctx(tenant_a), "tools/call", {"name": "slow", "arguments": {}})
    assert reply["error"]["code"] == RATE_LIMITED
    assert "limit of 2 background runs" in reply["error"]["message"]
    assert reply["error"]["data"]["retryAfter"] == quotas.CAP_RETRY_SECONDS
    assert await ToolRun.objects.filter(tenant=tenant_a).acount() == 3  # nothing queued
    assert quotas.refusals() == {"background_runs": 1}
