"""Cancellation races and progress after completion (UT-12, UT-14, UT-23), over the transport."""

from __future__ import annotations

import json

import pytest

from tests.transport.support import BOTH, Client, open_stream

pytestmark = pytest.mark.django_db(transaction=True)


def cancelled(request_id: int | str) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


async def test_ut12_a_cancel_arriving_after_the_response_is_ignored_and_the_session_goes_on(tools_a):
    client = Client()
    await client.initialize()
    done = await client.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, id=7)
    assert done.json()["result"]["content"][0]["text"] == "hi"
    late = await client.post(cancelled(7))
    assert late.status == 202 and late.body == b""
    again = await client.request("tools/call", {"name": "echo", "arguments": {"message": "again"}}, id=7)
    assert again.json()["result"]["content"][0]["text"] == "again"  # the id may be reused once answered


async def test_ut14_a_cancel_naming_the_initialize_request_does_not_undo_the_session(tenant_a):
    client = Client()
    init = await client.initialize(initialized=False)
    init_id = init.json()["id"]
    assert (await client.post(cancelled(init_id))).status == 202
    assert (await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    ping = await client.request("ping", id=2)
    assert ping.status == 200 and ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_ut01_ping_gets_an_empty_result_at_once_while_a_long_request_runs(tools_a):
    client = Client()
    await client.initialize()
    headers = {"accept": BOTH, "content-type": "application/json", **client.session_headers()}
    long_call = {
        "jsonrpc": "2.0",
        "id": "long",
        "method": "tools/call",
        "params": {"name": "count", "arguments": {"n": 20, "delay": 0.05}, "_meta": {"progressToken": 1}},
    }
    stream = await open_stream("POST", client.path, json.dumps(long_call).encode(), headers)
    await stream.next_message()
    ping = await client.request("ping", id="p")
    assert ping.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}
    await stream.disconnect()


async def test_ut23_no_progress_follows_the_response_of_its_request(tools_a):
    client = Client()
    await client.initialize()
    headers = {"accept": BOTH, "content-type": "application/json", **client.session_headers()}
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "count", "arguments": {"n": 3, "delay": 0.01}, "_meta": {"progressToken": "t"}},
    }
    stream = await open_stream("POST", client.path, json.dumps(call).encode(), headers)
    events = await stream.read_to_end()
    sent = [json.loads(e["data"]) for e in events if e.get("event") == "message"]
    # The response is the stream's last message: no progress (or log message) after it.
    assert sent[-1]["id"] == 9 and "result" in sent[-1]
    assert all("id" not in m for m in sent[:-1])
    progress = [m["params"]["progress"] for m in sent if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
