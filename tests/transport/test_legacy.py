"""The 2024-11-05 HTTP+SSE transport (HT-50..55)."""

from __future__ import annotations

import json

import pytest

from tests.transport.support import call, open_stream

pytestmark = pytest.mark.django_db(transaction=True)


def init(version: str = "2024-11-05") -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }


async def post(endpoint: str, payload, headers: dict | None = None):
    return await call(
        "POST",
        endpoint,
        json.dumps(payload).encode(),
        {"content-type": "application/json", **(headers or {})},
    )


async def test_ht52_ht53_legacy_round_trip_goes_over_the_sse_stream(tools_a):
    stream = await open_stream("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    assert stream.status == 200
    first = await stream.next_event()
    assert first["event"] == "endpoint"
    endpoint = first["data"]
    assert endpoint.startswith("/t/tenant-a/messages?session_id=")

    accepted = await post(endpoint, init())
    assert accepted.status == 202
    _, response = await stream.next_message()
    assert response["id"] == 1 and response["result"]["protocolVersion"] == "2024-11-05"

    assert (await post(endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    call_echo = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "old"}},
    }
    assert (await post(endpoint, call_echo)).status == 202
    _, echoed = await stream.next_message()
    assert echoed["id"] == 2
    assert echoed["result"]["content"][0]["text"] == "old"
    await stream.disconnect()

    gone = await post(endpoint, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert gone.status == 404


async def test_ht53_progress_goes_over_the_legacy_stream_before_the_response(tools_a):
    stream = await open_stream("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    endpoint = (await stream.next_event())["data"]
    await post(endpoint, init())
    await stream.next_message()
    payload = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "count", "arguments": {"n": 2, "delay": 0.01}, "_meta": {"progressToken": 1}},
    }
    assert (await post(endpoint, payload)).status == 202
    seen = []
    while True:
        _, message = await stream.next_message()
        seen.append(message)
        if message.get("id") == 7:
            break
    assert [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"] == [1, 2]
    await stream.disconnect()


async def test_ht54_legacy_endpoints_check_origin(tenant_a):
    response = await call("GET", "/t/tenant-a/sse", headers={"origin": "http://evil.example"})
    assert response.status == 403
    posted = await call(
        "POST",
        "/t/tenant-a/messages?session_id=L.x",
        b"{}",
        {"content-type": "application/json", "origin": "http://evil.example"},
    )
    assert posted.status == 403


async def test_legacy_post_with_unknown_session_gets_404(tenant_a):
    response = await post(
        "/t/tenant-a/messages?session_id=L.nope", {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    )
    assert response.status == 404


async def test_legacy_post_without_session_gets_400(tenant_a):
    response = await post("/t/tenant-a/messages", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status == 400


async def test_legacy_session_is_not_usable_on_another_tenant(tenant_a, tenant_b):
    stream = await open_stream("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    endpoint = (await stream.next_event())["data"]
    foreign = endpoint.replace("/t/tenant-a/", "/t/tenant-b/")
    response = await post(foreign, init())
    assert response.status == 404
    await stream.disconnect()


async def test_legacy_session_id_is_unknown_on_the_streamable_endpoint(tenant_a):
    stream = await open_stream("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    endpoint = (await stream.next_event())["data"]
    session_id = endpoint.split("session_id=")[1]
    response = await call(
        "POST",
        "/t/tenant-a/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
        {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-session-id": session_id,
        },
    )
    assert response.status == 404
    await stream.disconnect()
