"""Draining (streams/drain.py): refused in words once it began, open streams told, exchanges waited for
until their responses are written."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from mcp_app.streams import drain
from mcpsite.asgi import application
from tests.security.test_modern_isolation import acknowledged, listen
from tests.transport.support import BOTH, Client, make_headers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def undrained() -> Iterator[None]:
    drain.reset()
    yield
    drain.reset()


async def test_a_request_on_a_connection_opened_before_the_drain_is_refused_with_retry_after(tools_a):
    await drain.drain(0)
    response = await Client().request("ping")
    assert response.status == 503
    assert response.headers["retry-after"] == "1" and response.headers["connection"] == "close"
    assert b"shutting down" in response.body


async def test_a_listen_stream_gets_its_result_when_the_process_drains(tools_a):
    stream = await listen("tenant-a", {"toolsListChanged": True}, id="bye")
    try:
        await acknowledged(stream)
        assert await drain.drain(1) == 0
        _, closing = await stream.next_message()
        assert closing == {
            "jsonrpc": "2.0",
            "id": "bye",
            "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "bye"}},
        }
    finally:
        await stream.disconnect()


async def test_the_drain_waits_for_calls_in_flight_up_to_its_grace_period():
    drain.request_began()
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, drain.request_ended)
    started = loop.time()
    assert await drain.drain(5) == 0
    assert 0.15 < loop.time() - started < 2
    drain.request_began()
    assert await drain.drain(0.1) == 1  # past the grace period: what is left is reported, not waited for


async def test_the_drain_waits_until_a_posts_response_is_written_not_only_handled(tools_a):
    # Counted where the handler returned, a drain ended while the response was still being written and
    # Daphne cancelled it: the client read "SSE stream ended without a response" (CI, stop 26).
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": "/t/tenant-a/mcp",
        "raw_path": b"/t/tenant-a/mcp",
        "query_string": b"",
        "scheme": "http",
        "headers": make_headers({"accept": BOTH, "content-type": "application/json"}, body),
    }
    writing, written = asyncio.Event(), asyncio.Event()
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body"):
            writing.set()
            await written.wait()  # a slow socket: the last chunk is still on its way
        sent.append(message)

    exchange = asyncio.create_task(application(scope, receive, send))
    await asyncio.wait_for(writing.wait(), 5)
    draining = asyncio.create_task(drain.drain(5))
    await asyncio.sleep(0.2)
    assert not draining.done()  # the response is not written yet
    written.set()
    assert await asyncio.wait_for(draining, 5) == 0
    await exchange
    assert json.loads(sent[-1]["body"])["id"] == 1  # the whole answer went out
