"""POST on /t/<slug>/mcp: status codes, sessions, versions (checklist §3.2, §3.6, §3.7)."""

from __future__ import annotations

import json

import pytest

from mcp_app.models import Tool
from mcp_app.protocol.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR
from mcp_app.streams import sessions
from tests.transport.support import BOTH, Client, call

pytestmark = pytest.mark.django_db(transaction=True)


async def test_ht36_ht37_initialize_response_carries_a_visible_ascii_session_id(tenant_a):
    client = Client()
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    session_id = response.headers["mcp-session-id"]
    assert len(session_id) >= 32
    assert all(0x21 <= ord(c) <= 0x7E for c in session_id)
    body = response.json()
    assert body["id"] == 1 and body["result"]["protocolVersion"] == "2025-06-18"


async def test_ht12_notification_post_gets_202_with_empty_body(tenant_a):
    client = Client()
    await client.initialize(initialized=False)
    response = await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status == 202
    assert response.body == b""


async def test_ht12_response_post_gets_202_with_empty_body(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.post({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
    assert response.status == 202
    assert response.body == b""


async def test_ht14_request_gets_a_json_response_never_202(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.request("ping", id="p-1")
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


async def test_ht38_request_without_session_gets_400(tenant_a):
    response = await Client().request("tools/list", id=7)
    assert response.status == 400
    body = response.json()
    assert body["error"]["code"] == INVALID_REQUEST
    assert body["id"] == 7


async def test_ht39_unknown_session_gets_404(tenant_a):
    client = Client()
    client.session_id = "not-a-real-session"
    response = await client.request("ping")
    assert response.status == 404
    assert "Session" in response.json()["error"]["message"]


async def test_ht39_session_gets_404_after_delete(tenant_a):
    client = Client()
    await client.initialize()
    deleted = await call("DELETE", client.path, headers=client.session_headers())
    assert deleted.status == 204
    response = await client.request("ping")
    assert response.status == 404
    again = await call("DELETE", client.path, headers=client.session_headers())
    assert again.status == 404


async def test_session_of_tenant_a_is_unknown_on_tenant_b(tenant_a, tenant_b):
    client = Client("tenant-a")
    await client.initialize()
    intruder = Client("tenant-b")
    intruder.session_id, intruder.version = client.session_id, client.version
    response = await intruder.request("ping")
    assert response.status == 404
    deleted = await call("DELETE", intruder.path, headers=intruder.session_headers())
    assert deleted.status == 404
    assert (await client.request("ping")).status == 200


async def test_ht46_without_version_header_the_session_version_applies(tenant_a):
    client = Client()
    await client.initialize("2025-03-26")
    client.version = None
    # Batches are accepted only under 2025-03-26: proves the session's version was used.
    response = await client.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert response.status == 200
    assert response.json() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_ht47_unsupported_protocol_version_header_gets_400(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.request("ping", headers={"mcp-protocol-version": "1999-01-01"})
    assert response.status == 400
    assert "Unsupported MCP-Protocol-Version" in response.json()["error"]["message"]


async def test_ht47_unsupported_version_without_session_gets_400_and_no_session(tenant_a):
    response = await Client().request("server/discover", headers={"mcp-protocol-version": "2026-07-28"})
    assert response.status == 400
    assert "mcp-session-id" not in response.headers


async def test_a_supported_version_header_differing_from_the_session_is_served_under_the_negotiated_one(
    tools_a,
):
    # Real clients (the official conformance harness among them) send their newest version on every request.
    await Tool.objects.filter(name="echo").aupdate(title="Echo")
    client = Client()
    await client.initialize("2025-03-26")
    response = await client.request("tools/list", headers={"mcp-protocol-version": "2025-11-25"})
    assert response.status == 200
    [echo] = [tool for tool in response.json()["result"]["tools"] if tool["name"] == "echo"]
    # Shaped for the negotiated 2025-03-26, which has no Tool.title: the name shows in annotations.
    assert "title" not in echo and echo["annotations"]["title"] == "Echo"


async def test_an_unsupported_version_header_on_a_session_still_gets_400(tenant_a):
    client = Client()
    await client.initialize("2025-06-18")
    response = await client.request("ping", headers={"mcp-protocol-version": "1999-01-01"})
    assert response.status == 400
    assert "Unsupported MCP-Protocol-Version" in response.json()["error"]["message"]


async def test_a_bare_server_discover_without_the_2026_envelope_is_told_how_each_era_is_reached(
    tenant_a,
):
    response = await Client().request("server/discover", headers={"mcp-protocol-version": "2025-11-25"})
    assert response.status == 400
    error = response.json()["error"]
    assert error["code"] == METHOD_NOT_FOUND
    assert "'server/discover' needs the MCP 2026-07-28 envelope" in error["message"]
    assert "2024-11-05" in error["message"] and "initialize" in error["message"]
    assert "Mcp-Session-Id" not in error["message"]


async def test_a_known_method_without_a_session_still_gets_missing_session(tenant_a):
    response = await Client().request("tools/list", headers={"mcp-protocol-version": "2025-11-25"})
    assert response.status == 400
    assert "Missing Mcp-Session-Id" in response.json()["error"]["message"]


async def test_initialize_ignores_the_version_header(tenant_a):
    client = Client()
    response = await client.initialize("2025-11-25")
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"


async def test_406_when_accept_lacks_event_stream(tenant_a):
    client = Client()
    response = await client.request("ping", headers={"accept": "application/json"})
    assert response.status == 406
    assert b"Accept" in response.body


async def test_amb9_wildcard_accept_is_enough(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.request("ping", headers={"accept": "*/*"})
    assert response.status == 200


async def test_415_when_content_type_is_not_json(tenant_a):
    client = Client()
    response = await client.request("ping", headers={"content-type": "text/plain"})
    assert response.status == 415
    assert b"Content-Type" in response.body


async def test_413_when_content_length_exceeds_the_limit(tenant_a, settings):
    settings.MCP_MAX_BODY_BYTES = 1024
    client = Client()
    response = await client.post(None, raw=b"[" + b" " * 2000 + b"]")
    assert response.status == 413


async def test_413_when_the_body_is_longer_than_declared_limit_while_reading(tenant_a, settings):
    settings.MCP_MAX_BODY_BYTES = 1024
    client = Client()
    response = await client.post(None, raw=b" " * 2000, headers={"content-length": "10"})
    assert response.status == 413


async def test_malformed_json_is_a_parse_error_with_null_id(tenant_a):
    response = await Client().post(None, raw=b'{"jsonrpc": "2.0", "id": 1,')
    assert response.status == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": response.json()["error"]["message"]},
    }


async def test_invalid_utf8_is_a_parse_error(tenant_a):
    response = await Client().post(None, raw=b'{"jsonrpc": "2.0", "method": "\xff"}')
    assert response.status == 400
    assert response.json()["error"]["code"] == PARSE_ERROR


async def test_too_deep_nesting_is_a_parse_error_not_a_crash(tenant_a):
    deep = b"[" * 100_000 + b"]" * 100_000
    response = await Client().post(None, raw=deep)
    assert response.status == 400
    assert response.json()["error"]["code"] == PARSE_ERROR


async def test_non_object_body_is_an_invalid_request(tenant_a):
    response = await Client().post(42)
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST


async def test_invalid_message_gets_400_invalid_request(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.post({"jsonrpc": "1.0", "id": 3, "method": "ping"})
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST
    assert response.json()["id"] == 3


async def test_unknown_tenant_gets_a_readable_404(db):
    response = await Client("nobody").request("ping")
    assert response.status == 404
    assert b"No MCP server" in response.body


@pytest.fixture
def inactive_tenant(tenant_a):
    tenant_a.is_active = False
    tenant_a.save()
    return tenant_a


async def test_inactive_tenant_looks_unknown(inactive_tenant):
    response = await Client().request("ping")
    assert response.status == 404


async def test_other_methods_get_405_with_allow(tenant_a):
    response = await call("PUT", "/t/tenant-a/mcp", b"", {"content-type": "application/json"})
    assert response.status == 405
    assert "POST" in response.headers["allow"] and "GET" in response.headers["allow"]


async def test_state_changes_are_persisted_in_the_session(tools_a):
    client = Client()
    await client.initialize()
    subscribed = await client.request("resources/subscribe", {"uri": "file:///a.txt"})
    assert subscribed.status == 200, subscribed.body
    assert "result" in subscribed.json(), subscribed.body

    state = await sessions.get_store().peek(client.session_id)
    assert state.initialized is True
    assert state.subscriptions == ["file:///a.txt"]
    assert state.client_info == {"name": "test", "version": "1"}


async def test_body_reports_errors_as_readable_json(tenant_a):
    response = await Client().request("ping")
    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.body)["error"]["message"]


async def test_accept_header_values_are_compared_without_parameters(tenant_a):
    client = Client()
    await client.initialize()
    response = await client.request(
        "ping", headers={"accept": "application/json;q=0.9, text/event-stream;q=0.8"}
    )
    assert response.status == 200
    assert BOTH
