"""Draining (streams/drain.py): refused in words once it began, open streams told, calls waited for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from mcp_app.streams import drain
from tests.security.test_modern_isolation import acknowledged, listen
from tests.transport.support import Client

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
