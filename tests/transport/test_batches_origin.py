"""Batches (BP-14/15, HT-60..64, LC-11), Host/Origin checks and CORS (HT-02, AMB-10)."""

from __future__ import annotations

import pytest

from mcp_app.protocol.jsonrpc import INVALID_REQUEST
from tests.transport.support import Client, call

pytestmark = pytest.mark.django_db(transaction=True)


async def test_bp14_ht62_2025_03_26_batch_gets_an_array_of_responses(tools_a):
    client = Client()
    await client.initialize("2025-03-26")
    response = await client.post(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": "two",
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "x"}},
            },
        ]
    )
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    by_id = {r["id"]: r for r in response.json()}
    assert set(by_id) == {1, "two"}
    assert by_id[1]["result"] == {}
    assert by_id["two"]["result"]["content"][0]["text"] == "x"


async def test_bp14_ht61_batch_of_only_notifications_gets_202(tools_a):
    client = Client()
    await client.initialize("2025-03-26", initialized=False)
    response = await client.post(
        [
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},
        ]
    )
    assert response.status == 202
    assert response.body == b""


async def test_bp14_invalid_batch_members_get_error_entries(tools_a):
    client = Client()
    await client.initialize("2025-03-26")
    response = await client.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"foo": 1}])
    assert response.status == 200
    errors = [r for r in response.json() if "error" in r]
    assert errors == [{"jsonrpc": "2.0", "id": None, "error": errors[0]["error"]}]
    assert errors[0]["error"]["code"] == INVALID_REQUEST


async def test_bp15_batch_in_a_2025_06_18_session_gets_400_invalid_request(tools_a):
    client = Client()
    await client.initialize("2025-06-18")
    response = await client.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST


async def test_empty_batch_is_an_invalid_request(tools_a):
    client = Client()
    await client.initialize("2025-03-26")
    response = await client.post([])
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST


async def test_lc11_initialize_inside_a_batch_is_refused(tools_a):
    response = await Client().post(
        [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ]
    )
    assert response.status == 400
    assert "batch" in response.json()["error"]["message"]


async def test_ht02_foreign_origin_gets_403(tenant_a):
    client = Client()
    response = await client.request("ping", headers={"origin": "http://evil.example"})
    assert response.status == 403
    assert "Origin" in response.json()["error"]["message"]


async def test_ht02_foreign_origin_on_get_gets_403(tenant_a):
    response = await call(
        "GET", "/t/tenant-a/mcp", headers={"accept": "text/event-stream", "origin": "https://evil.example"}
    )
    assert response.status == 403


async def test_same_origin_is_allowed_and_gets_cors_headers(tenant_a):
    client = Client()
    response = await client.initialize()
    assert response.status == 200
    allowed = await client.request("ping", headers={"origin": "http://127.0.0.1:8000"})
    assert allowed.status == 200
    assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
    assert "Mcp-Session-Id" in allowed.headers["access-control-expose-headers"]


@pytest.fixture
def browser_tenant(tenant_a):
    tenant_a.allowed_origins = "https://app.example.com\n"
    tenant_a.save()
    return tenant_a


async def test_tenant_allowed_origin_passes_and_preflight_is_answered(browser_tenant):
    client = Client()
    await client.initialize()
    response = await client.request("ping", headers={"origin": "https://app.example.com"})
    assert response.status == 200
    preflight = await call(
        "OPTIONS",
        "/t/tenant-a/mcp",
        headers={"origin": "https://app.example.com", "access-control-request-method": "POST"},
    )
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    for name in ("Authorization", "Mcp-Session-Id", "MCP-Protocol-Version", "Last-Event-ID", "Content-Type"):
        assert name in preflight.headers["access-control-allow-headers"]
    other = await call("OPTIONS", "/t/tenant-b/mcp", headers={"origin": "https://app.example.com"})
    assert other.status == 404


async def test_preflight_from_a_foreign_origin_gets_403(browser_tenant):
    response = await call("OPTIONS", "/t/tenant-a/mcp", headers={"origin": "https://evil.example"})
    assert response.status == 403


async def test_absent_origin_is_allowed_for_non_browser_clients(tenant_a):
    response = await Client().initialize()
    assert "access-control-allow-origin" not in response.headers


async def test_host_outside_allowed_hosts_gets_400(tenant_a):
    response = await Client().request("ping", headers={"host": "rebound.evil.example:8000"})
    assert response.status == 400
    assert b"Host" in response.body
