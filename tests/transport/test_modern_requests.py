"""How a 2026-07-28 request is answered: JSON or its own SSE stream, hints, and a disconnect that cancels.

Transport tests through Channels' communicators (style §9); the SDK's view is in tests/e2e/test_modern_era.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_app.core.context import RequestContext
from mcp_app.core.versions import V2026_07_28
from mcp_app.handlers.python import register
from mcp_app.models import Policy, Tool
from tenants.models import Tenant
from tests.transport.support import BOTH, call, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

META = {
    "io.modelcontextprotocol/protocolVersion": V2026_07_28,
    "io.modelcontextprotocol/clientCapabilities": {},
}
CANCELLED: list[str] = []


@register("test_wait_for_cancel")
async def wait_for_cancel(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    await ctx.emit(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": ctx.progress_token, "progress": 0},
        }
    )
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        CANCELLED.append(arguments.get("marker", ""))
        raise
    return {"content": [{"type": "text", "text": "finished"}]}


def request(method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None):
    message = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": method,
        "params": {**(params or {}), "_meta": {**META, **(meta or {})}},
    }
    headers = {
        "accept": BOTH,
        "content-type": "application/json",
        "mcp-protocol-version": V2026_07_28,
        "mcp-method": method,
    }
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    return json.dumps(message).encode(), headers


async def test_a_quick_call_is_one_json_answer_marked_complete(tools_a):
    body, headers = request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    response = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "Tenant A"
    assert "ttlMs" not in result  # tools/call is not cacheable


async def test_progress_turns_the_answer_into_the_requests_own_stream_without_event_ids(tools_a):
    body, headers = request(
        "tools/call", {"name": "count", "arguments": {"n": 2, "delay": 0}}, meta={"progressToken": "p"}
    )
    response = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert response.headers["content-type"] == "text/event-stream"
    events = response.events()
    assert all("id" not in event for event in events)  # no resumption in 2026-07-28
    messages = [json.loads(event["data"]) for event in events]
    assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/progress", None]
    assert messages[-1]["id"] == 5 and messages[-1]["result"]["resultType"] == "complete"


async def test_closing_the_connection_cancels_the_running_handler(tools_a):
    await Tool.objects.acreate(
        tenant=tools_a, name="wait", handler="python", handler_config={"callable": "test_wait_for_cancel"}
    )
    CANCELLED.clear()
    body, headers = request(
        "tools/call", {"name": "wait", "arguments": {"marker": "m1"}}, meta={"progressToken": 1}
    )
    headers["mcp-name"] = "wait"
    stream = await open_stream("POST", "/t/tenant-a/mcp", body, headers)
    assert stream.status == 200
    _, progress = await stream.next_message()
    assert progress["method"] == "notifications/progress"
    await stream.communicator.send_input({"type": "http.disconnect"})
    async with asyncio.timeout(5):
        while not CANCELLED:
            await asyncio.sleep(0.01)
    assert CANCELLED == ["m1"]
    stream.communicator.future.cancel()


@pytest.mark.parametrize(
    ("scope_setting", "ttl", "expected"),
    [("auto", 60_000, "public"), ("private", 0, "private"), ("public", 5_000, "public")],
)
async def test_lists_carry_the_tenants_caching_hints(tools_a, scope_setting, ttl, expected):
    # A public tenant; the automatic scope of an OAuth tenant (private) is in tests/security/test_modern_isolation.py.
    await Tenant.objects.filter(pk=tools_a.pk).aupdate(cache_scope=scope_setting, cache_ttl_ms=ttl)
    for method in ("tools/list", "resources/list", "server/discover"):
        body, headers = request(method)
        result = (await call("POST", "/t/tenant-a/mcp", body, headers)).json()["result"]
        assert (result["ttlMs"], result["cacheScope"]) == (ttl, expected), method


async def test_a_kept_list_answer_gives_way_to_an_edit_and_an_error_is_never_kept(tools_a):
    body, headers = request("tools/list")
    names = [
        t["name"] for t in (await call("POST", "/t/tenant-a/mcp", body, headers)).json()["result"]["tools"]
    ]
    assert names == ["count", "echo"]
    again = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert [t["name"] for t in again.json()["result"]["tools"]] == names and again.json()["id"] == 5
    await Tool.objects.acreate(
        tenant=tools_a, name="added", handler="python", handler_config={"callable": "echo"}
    )
    after = (await call("POST", "/t/tenant-a/mcp", body, headers)).json()["result"]["tools"]
    assert [t["name"] for t in after] == ["added", "count", "echo"]
    bad, headers = request("tools/list", {"cursor": "forged"})
    for _ in range(2):
        response = await call("POST", "/t/tenant-a/mcp", bad, headers)
        assert response.status == 400 and response.json()["error"]["message"] == "Invalid cursor."


async def test_a_kept_list_answer_is_the_callers_own_under_policies(tools_a, tenant_a):
    """2026-07-28 lists are kept per definitions version (QUIET_METHODS): under a policy that reads the
    caller, one caller's kept list must never be another's (AMB-347)."""
    await Policy.objects.acreate(
        tenant=tenant_a, name="not-from-there", condition='target.name == "echo" && caller.address == "10.0.0.1"'
    )
    body, headers = request("tools/list")
    lists = {}
    for address in ("10.0.0.2", "10.0.0.1", "10.0.0.2"):
        response = await call("POST", "/t/tenant-a/mcp", body, headers, address=address)
        lists[address] = lists.get(address, []) + [{t["name"] for t in response.json()["result"]["tools"]}]
    assert "echo" in lists["10.0.0.2"][0] and lists["10.0.0.2"][0] == lists["10.0.0.2"][1]
    assert lists["10.0.0.1"][0] == lists["10.0.0.2"][0] - {"echo"}
