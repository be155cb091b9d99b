"""SSE on POST and GET, resumability, cancellation (checklist §3.2-§3.5, §6.2)."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from mcp_app.infra import notify
from mcp_app.streams import inflight
from tests.transport.support import BOTH, Client, call, messages, open_stream

pytestmark = pytest.mark.django_db(transaction=True)


def count_call(request_id: int | str = 5, n: int = 3, delay: float = 0.01, token: str | None = "tok") -> dict:
    params: dict = {"name": "count", "arguments": {"n": n, "delay": delay}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def post_stream(client: Client, payload: dict):
    headers = {"accept": BOTH, "content-type": "application/json", **client.session_headers()}
    return await open_stream("POST", client.path, json.dumps(payload).encode(), headers)


async def get_stream(client: Client, extra: dict | None = None):
    headers = {"accept": "text/event-stream", **client.session_headers(), **(extra or {})}
    return await open_stream("GET", client.path, b"", headers)


async def test_a_request_that_emits_progress_is_answered_over_sse_with_the_response_last(tools_a):
    client = Client()
    await client.initialize()
    response = await client.post(count_call(n=3))
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    sent = messages(response.events())
    progress = [m for m in sent if m.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    assert all(p["params"]["progressToken"] == "tok" for p in progress)
    assert sent[-1]["id"] == 5 and sent[-1]["result"]["structuredContent"] == {"count": 3}
    ids = [e["id"] for e in response.events() if e.get("event") == "message"]
    assert len(set(ids)) == len(ids)


async def test_a_request_that_emits_nothing_is_answered_with_json(tools_a):
    client = Client()
    await client.initialize()
    response = await client.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["structuredContent"] == {"echo": "hi"}


async def test_2025_11_25_sse_starts_with_a_priming_event_and_retry(tools_a, settings):
    settings.MCP_SSE_RETRY_MS = 1234
    client = Client()
    await client.initialize("2025-11-25")
    response = await client.post(count_call(n=1))
    first = response.events()[0]
    assert first["id"].endswith("-0")
    assert first["data"] == ""
    assert first["retry"] == "1234"
    assert "event" not in first


async def test_ht33_event_ids_are_unique_across_the_sessions_streams(tools_a):
    client = Client()
    await client.initialize()
    one = await client.post(count_call(request_id=1, n=2))
    two = await client.post(count_call(request_id=2, n=2))
    ids = [e["id"] for r in (one, two) for e in r.events() if "id" in e]
    assert len(ids) == len(set(ids)) >= 6
    streams = {i.rsplit("-", 1)[0] for i in ids}
    assert len(streams) == 2


async def test_ht19_ht34_a_broken_post_stream_is_resumed_with_last_event_id(tools_a):
    client = Client()
    await client.initialize()
    stream = await post_stream(client, count_call(n=4, delay=0.05))
    assert stream.status == 200
    first_id, first = await stream.next_message()
    assert first["method"] == "notifications/progress"
    await stream.abort()  # the client vanishes: not a cancellation

    resumed = await get_stream(client, {"last-event-id": first_id})
    assert resumed.status == 200
    rest = await resumed.read_to_end()
    replayed = [json.loads(e["data"]) for e in rest if e.get("event") == "message"]
    assert replayed[-1]["id"] == 5 and replayed[-1]["result"]["structuredContent"] == {"count": 4}
    progress = [m["params"]["progress"] for m in replayed if m.get("method") == "notifications/progress"]
    assert progress == [2, 3, 4]
    stream_id = first_id.rsplit("-", 1)[0]
    assert all(e["id"].startswith(stream_id + "-") for e in rest if "id" in e)


async def test_ht35_resume_replays_only_that_streams_events(tools_a):
    client = Client()
    await client.initialize()
    one = await client.post(count_call(request_id=1, n=2))
    two = await client.post(count_call(request_id=2, n=2))
    one_ids = [e["id"] for e in one.events() if "id" in e]
    resumed = await get_stream(client, {"last-event-id": one_ids[0]})
    rest = await resumed.read_to_end()
    assert [e["id"] for e in rest if "id" in e] == one_ids[1:]
    assert all(json.loads(e["data"]).get("id") != 2 for e in rest if e.get("event") == "message")
    assert two.status == 200


async def test_ht34_last_event_id_of_another_session_does_not_replay(tools_a):
    owner = Client()
    await owner.initialize()
    done = await owner.post(count_call(n=1))
    foreign_id = done.events()[0]["id"]
    other = Client()
    await other.initialize()
    stream = await get_stream(other, {"last-event-id": foreign_id})
    assert stream.status == 200
    await stream.assert_quiet(0.3)
    await stream.disconnect()


async def test_ut10_cancelled_request_gets_no_response_and_stops(tools_a):
    client = Client()
    await client.initialize()
    stream = await post_stream(client, count_call(request_id="long", n=50, delay=0.05))
    _, first = await stream.next_message()
    assert first["method"] == "notifications/progress"
    cancel = await client.post(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "long", "reason": "user"},
        }
    )
    assert cancel.status == 202
    rest = await stream.read_to_end()
    sent = [json.loads(e["data"]) for e in rest if e.get("event") == "message"]
    assert all("result" not in m and "error" not in m for m in sent)
    assert len(sent) < 10


async def test_lc12_cancel_for_unknown_ids_is_ignored(tools_a):
    client = Client()
    await client.initialize()
    cancel = await client.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
    )
    assert cancel.status == 202
    assert (await client.request("ping")).status == 200


async def test_ht26_get_opens_an_event_stream(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    await stream.disconnect()


async def test_get_without_event_stream_accept_gets_406(tools_a):
    client = Client()
    await client.initialize()
    response = await call(
        "GET", client.path, headers={"accept": "application/json", **client.session_headers()}
    )
    assert response.status == 406


async def test_get_without_session_gets_400(tools_a):
    response = await call("GET", "/t/tenant-a/mcp", headers={"accept": "text/event-stream"})
    assert response.status == 400


async def test_get_stream_receives_tools_list_changed(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await asyncio.sleep(0)  # let the consumer join its groups
    await stream.assert_quiet(0.1)
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "tools", 99)
    event_id, message = await stream.next_message()
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert event_id and event_id.endswith("-1")
    await stream.disconnect()


async def test_lc10_no_list_changed_before_notifications_initialized(tools_a):
    client = Client()
    await client.initialize(initialized=False)
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "tools", 99)
    await stream.assert_quiet(0.3)
    await stream.disconnect()


async def test_resources_updated_only_for_subscribed_uris(tools_a):
    client = Client()
    await client.initialize()
    assert "result" in (await client.request("resources/subscribe", {"uri": "file:///a.txt"})).json()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    await sync_to_async(notify.publish_resource_updated)(tools_a.id, "file:///b.txt", 5)
    await sync_to_async(notify.publish_resource_updated)(tools_a.id, "file:///a.txt", 6)
    _, message = await stream.next_message()
    assert message == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "file:///a.txt"},
    }
    await stream.assert_quiet(0.2)
    await stream.disconnect()


async def test_list_changed_does_not_reach_another_tenants_stream(tools_a, tenant_b):
    client = Client("tenant-b")
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "tools", 99)
    await stream.assert_quiet(0.3)
    await stream.disconnect()


async def test_ht28_responses_never_go_on_the_get_stream(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    response = await client.post(count_call(n=2))
    assert messages(response.events())[-1]["id"] == 5
    await stream.assert_quiet(0.3)
    await stream.disconnect()


async def test_ht31_a_second_get_stream_is_refused_so_each_message_has_one_stream(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    second = await call(
        "GET", client.path, headers={"accept": "text/event-stream", **client.session_headers()}
    )
    assert second.status == 409
    assert b"GET stream" in second.body
    await stream.disconnect()
    third = await get_stream(client)
    assert third.status == 200
    await third.disconnect()


async def test_ht31_list_changed_goes_to_the_get_stream_not_the_post_stream(tools_a):
    client = Client()
    await client.initialize()
    get = await get_stream(client)
    await get.assert_quiet(0.1)
    post = await post_stream(client, count_call(n=3, delay=0.2))
    await post.next_message()
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "prompts", 99)
    _, message = await get.next_message()
    assert message["method"] == "notifications/prompts/list_changed"
    rest = [json.loads(e["data"]) for e in await post.read_to_end() if e.get("event") == "message"]
    assert all(m.get("method") != "notifications/prompts/list_changed" for m in rest)
    await get.disconnect()


async def test_get_stream_resumes_with_its_own_last_event_id(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "tools", 2)
    first_id, _ = await stream.next_message()
    await sync_to_async(notify.publish_list_changed)(tools_a.id, "prompts", 3)
    await stream.next_message()
    await stream.disconnect()
    resumed = await get_stream(client, {"last-event-id": first_id})
    event_id, message = await resumed.next_message()
    assert message["method"] == "notifications/prompts/list_changed"
    assert event_id == first_id.rsplit("-", 1)[0] + "-2"
    await resumed.disconnect()


async def test_delete_closes_the_open_get_stream(tools_a):
    client = Client()
    await client.initialize()
    stream = await get_stream(client)
    await stream.assert_quiet(0.1)
    deleted = await call("DELETE", client.path, headers=client.session_headers())
    assert deleted.status == 204
    await stream.read_to_end()
    assert stream.ended


async def test_cancel_published_on_the_session_group_stops_the_request_where_it_runs(tools_a):
    """Another process's notifications/cancelled arrives as mcp.cancel on the session's group."""
    client = Client()
    await client.initialize()
    get = await get_stream(client)
    await get.assert_quiet(0.1)
    post = await post_stream(client, count_call(request_id=11, n=50, delay=0.05))
    await post.next_message()
    await notify.apublish_session(
        client.session_id,
        {"type": "mcp.cancel", "session_id": client.session_id, "request_id": 11, "reason": "x"},
    )
    rest = [json.loads(e["data"]) for e in await post.read_to_end() if e.get("event") == "message"]
    assert all(m.get("id") != 11 for m in rest)
    await get.disconnect()


@pytest.mark.services
async def test_ut10_a_cancel_from_another_process_before_this_one_listens_still_stops_the_request(tools_a):
    """The runner joins the session group only after 0.2 s; a cancel announced earlier waits in Redis."""
    client = Client()
    await client.initialize()
    post = await post_stream(client, count_call(request_id=21, n=50, delay=0.05))
    await post.next_message()  # ~0.05 s in: this process does not listen on the group yet
    assert not inflight._listener().joined
    await inflight.announce(client.session_id, 21, "from another process")  # what that process sends
    rest = [json.loads(e["data"]) for e in await post.read_to_end() if e.get("event") == "message"]
    assert all(m.get("id") != 21 for m in rest)
    assert len(rest) < 20


async def test_amb8_delete_cancels_the_sessions_running_requests(tools_a):
    client = Client()
    await client.initialize()
    post = await post_stream(client, count_call(request_id=12, n=50, delay=0.05))
    await post.next_message()
    deleted = await call("DELETE", client.path, headers=client.session_headers())
    assert deleted.status == 204
    rest = [json.loads(e["data"]) for e in await post.read_to_end() if e.get("event") == "message"]
    assert all(m.get("id") != 12 for m in rest)
